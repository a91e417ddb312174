// Written for exactq's tests: one step reaches "done" through ten updates of probability
// 0.1 each, whose floating-point sum is 0.9999999999999999, although the event is sure;
// then a 400-step ladder climbed with probability 0.1 per step (1e-400 underflows to 0),
// which is reached with positive probability all the same.
dtmc
module m
  s : [0..11] init 0;
  k : [0..400] init 0;
  f : bool init false;
  [] s = 0 -> 0.1 : (s'=1) + 0.1 : (s'=2) + 0.1 : (s'=3) + 0.1 : (s'=4) + 0.1 : (s'=5)
            + 0.1 : (s'=6) + 0.1 : (s'=7) + 0.1 : (s'=8) + 0.1 : (s'=9) + 0.1 : (s'=10);
  [] s > 0 & s < 11 -> (s'=11);
  [] s = 11 & !f & k < 400 -> 0.1 : (k'=k+1) + 0.9 : (f'=true);
  [] s = 11 & (f | k = 400) -> true;
endmodule
label "done" = s >= 1 & s <= 10;
label "top" = k = 400;

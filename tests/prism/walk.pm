// A reflecting random walk on 0..4 written for exactq's tests: period 2, so its
// k-step law alternates between the even and the odd states for ever.
dtmc
const double p = 0.4;
module w
  k : [0..4] init 0;
  [step] k = 0 -> (k'=1);
  [step] k > 0 & k < 4 -> p : (k'=k+1) + 1 - p : (k'=k-1);
  [step] k = 4 -> (k'=3);
endmodule
label "top" = k = 4;
rewards "pos" true : k; [step] k = 1 : 2; endrewards

// Uses flashgen through its installed headers and library: parses a program, runs it on the
// reference and on the CPU backend, and checks the two with verify. Exit 0 when they agree.
#include <cstdio>

#include "flashgen/flashgen.h"
#include "flashgen/verify.h"

int main() {
  using namespace flashgen;
  const char* src = R"(
program local(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {
  s = where(n <= m and m - n < 32, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f32[m, e] = sum(softmax(s, n) * v, n)
}
)";
  Program p = parse_source(src, "local.attn").at(0);
  TensorMap in = random_inputs(p, {{"m", 70}, {"n", 90}, {"d", 16}, {"e", 8}}, 1);
  VerifyReport r = verify(p, in);
  std::printf("%s", verify_text(p, r, bind_extents(p, in)).c_str());
  return r.ok() && r.ran() >= 2 ? 0 : 1;
}

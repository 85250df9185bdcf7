// Talks to a worker through the installed C++ client: prints the model's name, the shape of an
// embedding and a greedy generation, for the test to compare with the worker's own answers.
#include <clients/cpp/client.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer ENDPOINT PROMPT\n");
    return 2;
  }
  rwkvd::client::Client c(argv[1]);
  const rwkvd::protocol::Value hello = c.hello();
  std::printf("model %s\n", hello.find("model")->find("name")->as_str().c_str());
  const rwkvd::client::Tensor e = c.embed({rwkvd::protocol::Input{argv[2], {}}});
  std::printf("embed %lld %lld\n", static_cast<long long>(e.shape[0]),
              static_cast<long long>(e.shape[1]));
  rwkvd::client::GenerateOptions o;
  o.sampling.temperature = 0;
  o.sampling.max_tokens = 6;
  const rwkvd::client::GenerateResult g = c.generate(rwkvd::protocol::Input{argv[2], {}}, o);
  std::printf("tokens");
  for (int32_t t : g.tokens) std::printf(" %d", t);
  std::printf("\n");
  return 0;
}

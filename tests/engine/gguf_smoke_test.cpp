#include <gtest/gtest.h>

#include "engine/gguf.h"
#include "engine/model.h"
#include "tests/support/fixtures.h"

namespace rwkvd::engine {

TEST(GgufSmoke, OpensSyntheticFixture) {
  RWKVD_FIXTURE(path, "rwkv7/synthetic-A.q4_k_m.gguf");
  auto m = Rwkv7Model::load(path.string());
  EXPECT_EQ(m->hparams().n_layer, 3u);
  EXPECT_EQ(m->hparams().n_embd, 256u);
  EXPECT_EQ(m->hparams().n_vocab, 1024u);
  EXPECT_EQ(m->head->type, GgmlType::Q6_K);
}

}  // namespace rwkvd::engine

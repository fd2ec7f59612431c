// Writes one pickle with PickleWriter to the file named by argv[1], holding every kind of value the writer has (and
// the edges of each: integer widths, batches past 1000 items, invalid UTF-8, the memo), so that
// pickle_writer_test.py can load it with Python's own pickle module and compare it with what it should be.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "analyzer/export/pickle_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pickle_writer_sample OUT.pickle\n");
    return 2;
  }
  using cumemtrace::analyzer::PickleWriter;
  std::string out;
  PickleWriter w(&out);
  w.BeginDict();
  w.Key("ints");
  w.BeginList();
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536}, int64_t{-1},
                    int64_t{-128}, int64_t{-129}, int64_t{2147483647}, int64_t{2147483648}, int64_t{-2147483648},
                    int64_t{-2147483649}, int64_t{1} << 40, int64_t{139892487094272},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    w.Int(v);
  }
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Uint(uint64_t{1} << 63);
  w.EndList();
  w.Key("strings");
  w.BeginList();
  w.String("");
  w.String("segment_alloc");
  w.String("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");  // café € 🔥
  w.String("bad \xff\xfe end \xc3");                      // invalid bytes
  w.String("surrogate \xed\xa0\x80.");                   // an encoded surrogate is not UTF-8
  w.EndList();
  w.Key("flags");
  w.BeginList();
  w.Bool(true);
  w.Bool(false);
  w.None();
  w.IntPair(0, 7);
  w.EndList();
  w.Key("long_list");  // 2500 items: three APPENDS batches
  w.BeginList();
  for (int i = 0; i < 2500; ++i) w.Int(i);
  w.EndList();
  w.Key("long_dict");  // 1500 items: two SETITEMS batches
  w.BeginDict();
  for (int i = 0; i < 1500; ++i) {
    w.Key(absl::StrCat("k", i));
    w.Int(i * 3);
  }
  w.EndDict();
  w.Key("empty");
  w.BeginDict();
  w.Key("list");
  w.BeginList();
  w.EndList();
  w.Key("dict");
  w.BeginDict();
  w.EndDict();
  w.EndDict();
  // The memo: a frame list written once and referenced again (300 memo entries first, so that both the one-byte
  // and the four-byte forms of BINPUT/BINGET are used).
  w.Key("memo");
  w.BeginList();
  uint32_t first = 0;
  for (int i = 0; i < 300; ++i) {
    w.BeginDict();
    w.Key("filename");
    w.String("train.py");
    w.Key("line");
    w.Int(i);
    w.Key("name");
    w.String("step");
    w.EndDict();
    const uint32_t id = w.Memoize();
    if (i == 0) first = id;
  }
  w.Get(first);
  w.Get(299);
  w.EndList();
  w.EndDict();
  w.Finish();
  std::FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}

// The redaction rules on their own: the program's tree for native and Python programs, paths inside and outside
// it, site-packages, argv. Expected values are written out by hand from the rules in docs and the brief.
#include "analyzer/tools/path_redaction.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(ProgramTree, NativeProgramIsTheExecutablesDirectory) {
  const ProgramTree tree = FindProgramTree("/home/ann/proj/bin/train", {"./bin/train", "--steps", "3"}, {});
  EXPECT_EQ(tree.dir, "/home/ann/proj/bin");
  EXPECT_FALSE(tree.python);
}

TEST(ProgramTree, PythonProgramIsTheScriptsDirectory) {
  const ProgramTree tree =
      FindProgramTree("/usr/bin/python3.11", {"python3", "-u", "-X", "dev", "/home/ann/proj/train.py", "--lr"}, {});
  EXPECT_TRUE(tree.python);
  EXPECT_EQ(tree.dir, "/home/ann/proj");
  EXPECT_EQ(tree.program_arg, 4u);
}

TEST(ProgramTree, RelativeScriptIsPlacedByTheTracesPythonFiles) {
  const ProgramTree tree = FindProgramTree("/usr/bin/python3", {"python3", "./src/train.py"},
                                           {"/usr/lib/python3.11/threading.py", "/home/ann/proj/src/train.py"});
  EXPECT_EQ(tree.dir, "/home/ann/proj");
}

TEST(ProgramTree, PythonWithoutAScriptHasNoTree) {
  EXPECT_EQ(FindProgramTree("/usr/bin/python3", {"python3", "-m", "torch.distributed.run"}, {}).dir, "");
  EXPECT_EQ(FindProgramTree("/usr/bin/python3", {"python3", "-c", "import torch"}, {}).dir, "");
}

TEST(RedactPath, InsideTheTreeBecomesRelative) {
  ProgramTree tree;
  tree.dir = "/home/ann/proj";
  EXPECT_EQ(RedactPath("/home/ann/proj/model/net.py", tree), "model/net.py");
  EXPECT_EQ(RedactPath("/home/ann/proj", tree), ".");
  // A sibling that shares the prefix is outside.
  EXPECT_EQ(RedactPath("/home/ann/project2/x.py", tree), "x.py");
  EXPECT_EQ(RedactPath("/home/ann/proj/../secret/x.py", tree), "x.py");
}

TEST(RedactPath, OutsideKeepsSitePackagesTailElseTheName) {
  ProgramTree tree;
  tree.dir = "/home/ann/proj";
  EXPECT_EQ(RedactPath("/home/ann/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", tree),
            "site-packages/torch/nn/modules/linear.py");
  EXPECT_EQ(RedactPath("/usr/lib/python3/dist-packages/numpy/core/_methods.py", tree),
            "dist-packages/numpy/core/_methods.py");
  EXPECT_EQ(RedactPath("/opt/conda/lib/libcudart.so.13", tree), "libcudart.so.13");
  EXPECT_EQ(RedactPath("/build/glibc-x/csu/../sysdeps/nptl/libc_start_call_main.h", tree),
            "libc_start_call_main.h");
}

TEST(RedactPath, NamesThatAreNotPathsStay) {
  const ProgramTree tree;
  EXPECT_EQ(RedactPath("<frozen importlib._bootstrap>", tree), "<frozen importlib._bootstrap>");
  EXPECT_EQ(RedactPath("linux-vdso.so.1", tree), "linux-vdso.so.1");
  EXPECT_EQ(RedactPath("src/train.py", tree), "src/train.py");
  EXPECT_EQ(RedactPath("../../home/ann/x.py", tree), "x.py");
  EXPECT_EQ(RedactPath("", tree), "");
  // No tree: every absolute path is reduced.
  EXPECT_EQ(RedactPath("/home/ann/proj/train.py", tree), "train.py");
}

TEST(RedactArgv, PythonKeepsTheScriptAndItsArguments) {
  const std::vector<std::string> argv = {"/home/ann/venv/bin/python3", "-u", "/home/ann/proj/train.py",
                                         "--data=/data/ann/imagenet", "/home/ann/proj/cfg/a.yaml", "--lr", "0.1"};
  const ProgramTree tree = FindProgramTree("/usr/bin/python3.11", argv, {});
  EXPECT_EQ(RedactArgv(argv, tree), (std::vector<std::string>{"python3", "train.py", "--data=imagenet",
                                                               "cfg/a.yaml", "--lr", "0.1"}));
}

TEST(RedactArgv, NativeKeepsItsArguments) {
  const std::vector<std::string> argv = {"/home/ann/proj/bin/train", "-o", "/tmp/ann/out.bin", "3"};
  const ProgramTree tree = FindProgramTree("/home/ann/proj/bin/train", argv, {});
  EXPECT_EQ(RedactArgv(argv, tree), (std::vector<std::string>{"train", "-o", "out.bin", "3"}));
}

TEST(RedactText, ReducesEveryAbsolutePathWord) {
  ProgramTree tree;
  tree.dir = "/home/ann/proj";
  EXPECT_EQ(RedactText("skipped /usr/lib/libtorch_cuda.so and /home/ann/proj/a.so", tree),
            "skipped libtorch_cuda.so and a.so");
}

}  // namespace
}  // namespace cumemtrace::analyzer

#!/usr/bin/env bash
# Probes Python frames on the GPU machine (its Python differs from the CPU tests'): the ctypes script of the e2e
# tests against the fake driver (lines checked by eye against its LINE markers) and a real PyTorch run, printing the
# Python frame chains each trace holds. Usage (from the repository root, device machine): OUT=dir bash tests/gpu/python/layout_probe.sh
set -u
# `timeout` stays outside the preload's environment: only the first process that loads the preload traces.
G=$PWD/gpu-build
P=$G/preload/libcumemtrace.so
mkdir -p $OUT/py
python3 --version; which python3; nvidia-smi -L
python3 -c "import sys, sysconfig; print(sys.version); print(sysconfig.get_paths()['include'])"
ls $(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")/internal 2>/dev/null | head -3
echo "== ctypes against the fake driver"
timeout 60 env LD_LIBRARY_PATH=$G/fakes FAKE_CUDA_TOTAL_BYTES=17179869184 LD_PRELOAD=$P CUMEMTRACE_OUTPUT=$OUT/py/ctypes.pb python3 tests/e2e/python/ctypes_alloc.py $G/fakes; echo rc=$?
python3 tests/gpu/python/trace_python_frames.py $OUT/py/ctypes.pb
grep -n "LINE:" tests/e2e/python/ctypes_alloc.py
echo "== torch train under the preload"
timeout 120 env LD_PRELOAD=$P CUMEMTRACE_OUTPUT=$OUT/py/torch.pb python3 tests/gpu/torch_train_pinned.py $OUT/py/torch_truth.json > $OUT/py/torch_stdout.txt 2>&1; echo rc=$?
tail -3 $OUT/py/torch_stdout.txt
python3 tests/gpu/python/trace_python_frames.py $OUT/py/torch.pb > $OUT/py/torch_chains.txt; echo rc=$?
grep -c "stack leaf" $OUT/py/torch_chains.txt
head -60 $OUT/py/torch_chains.txt
$G/analyzer/cumem-analyze $OUT/py/torch.pb | tail -25

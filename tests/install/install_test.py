#!/usr/bin/env python3
"""The tool as its users get it: installed, on their PATH, the launcher finding the library beside itself.

  install_test.py prefix --build B --program P --fake-cuda D --cpack C
      `cmake --install B --prefix TMP`, then TMP/bin/cumemtrace traces P (an e2e program that reaches the fake
      driver in D) and TMP/bin/cumem-analyze reads the trace.
  install_test.py deb ...
      `cpack -G DEB` makes the package; its Depends are checked; it is installed with `dpkg -i` (only when
      CUMEMTRACE_TEST_DPKG_SYSTEM=1 and root, as in CI on a fresh machine: it installs into /usr) or else into a
      scratch dpkg root (`dpkg --root`), and the installed tool traces P as above.
Exit 77 (CTest: skipped) with a reason when the machine cannot run a mode (no dpkg, no dpkg-shlibdeps).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def run(cmd, **kwargs):
    """Runs cmd; on failure prints its output and raises."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}\nstdout:\n{result.stdout}\n"
                             f"stderr:\n{result.stderr}")
    return result


def check_files(prefix, want):
    missing = [f for f in want if not os.path.exists(os.path.join(prefix, f))]
    assert not missing, f"not installed under {prefix}: {missing}"


def trace_with_installed(bin_dir, lib_dir, program, fake_cuda, work):
    """Traces program with bin_dir/cumemtrace and reads the trace with bin_dir/cumem-analyze."""
    env = {
        "PATH": bin_dir + ":/usr/bin:/bin",
        "LD_LIBRARY_PATH": fake_cuda,
        "FAKE_CUDA_TOTAL_BYTES": str(16 << 30),
        "FAKE_CUDA_FAIL_ABOVE": str(128 << 20),
    }
    # The launcher must pick the installed library, not the build tree's.
    shown = run(["cumemtrace", "--", "/bin/sh", "-c", 'echo "$LD_PRELOAD"'], env=env, cwd=work).stdout.strip()
    expected = os.path.realpath(os.path.join(lib_dir, "libcumemtrace.so"))
    assert shown.split(":")[0] == expected, f"launcher preloads {shown!r}, expected {expected!r}"

    traced = run(["cumemtrace", "-o", "run.%p.pb", "--", program], env=env, cwd=work)
    traces = [f for f in os.listdir(work) if f.startswith("run.") and f.endswith(".pb")]
    assert len(traces) == 1, f"expected one trace in {work}, found {traces}; stderr:\n{traced.stderr}"
    trace = traces[0]
    wrote = [l for l in traced.stderr.splitlines() if l.startswith("cumemtrace: wrote ")]
    assert len(wrote) == 1 and wrote[0].endswith(f"): cumem-analyze {trace}"), \
        f"expected one 'cumemtrace: wrote {trace} (...): cumem-analyze {trace}' line; stderr:\n{traced.stderr}"

    summary = json.loads(run(["cumem-analyze", trace, "--json"], env=env, cwd=work).stdout)
    health = summary["health"]
    assert health["has_trailer"] and health["events"] and health["events"] > 0, f"health: {health}"
    grouped = f"{health['events']:,}".replace(",", " ")
    assert f"({grouped} event" in wrote[0], f"the wrote line {wrote[0]!r} does not say {grouped} events"
    events = json.loads(run(["cumem-analyze", "events", trace, "--json"], env=env, cwd=work).stdout)
    count = len(events.get("events", []))
    assert count > 0, f"the installed tool's trace holds no events: {json.dumps(events)[:400]}"
    print(f"traced {program} with {bin_dir}/cumemtrace: {trace}, {count} events, read by the installed analyzer")


def mode_prefix(args):
    with tempfile.TemporaryDirectory(prefix="cumemtrace-install-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", args.build, "--prefix", prefix])
        check_files(prefix, ["bin/cumemtrace", "bin/cumem-analyze", "lib/libcumemtrace.so", "lib/libunwind.so.8",
                             "lib/libdw.so.1", "lib/libelf.so.1", "share/doc/cumemtrace/README.md",
                             "share/doc/cumemtrace/docs/design.md", "share/doc/cumemtrace/docs/format.md"])
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        trace_with_installed(os.path.join(prefix, "bin"), os.path.join(prefix, "lib"), args.program,
                             args.fake_cuda, work)


def installed_packages():
    out = run(["dpkg-query", "-W", "-f=${Package}\\n"]).stdout
    return {line.split(":")[0] for line in out.split()}


def mode_deb(args):
    for tool in ("dpkg", "dpkg-deb", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} not found (Debian's dpkg and dpkg-dev make and install the .deb)")
            return SKIP
    with tempfile.TemporaryDirectory(prefix="cumemtrace-deb-") as tmp:
        run([args.cpack, "-G", "DEB", "--config", os.path.join(args.build, "CPackConfig.cmake"), "-B", tmp])
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        assert len(debs) == 1, f"cpack made {debs} in {tmp}"
        deb = os.path.join(tmp, debs[0])
        contents = run(["dpkg-deb", "-c", deb]).stdout
        for path in ("./usr/bin/cumemtrace", "./usr/bin/cumem-analyze", "./usr/lib/libcumemtrace.so",
                     "./usr/share/doc/cumemtrace/docs/design.md"):
            assert path in contents, f"{path} not in {deb}:\n{contents}"
        assert "libunwind.so.8" not in contents, f"the .deb must depend on libunwind8, not carry it:\n{contents}"
        depends = run(["dpkg-deb", "-f", deb, "Depends"]).stdout.strip()
        names = [d.strip().split()[0] for d in depends.split(",") if d.strip()]
        for need in ("libunwind8", "libdw1", "libc6", "libstdc++6"):
            assert need in names, f"Depends lacks {need}: {depends}"
        assert any(n.startswith("libprotobuf") for n in names), f"Depends lacks libprotobuf: {depends}"
        # Every dependency is satisfiable here: the build's own binaries ran against these packages.
        have = installed_packages()
        unmet = [n for n in names if n.split(":")[0] not in have]
        assert not unmet, f"Depends names packages not installed on this machine: {unmet} (of {depends})"
        print(f"{debs[0]}: Depends: {depends}")

        work = os.path.join(tmp, "work")
        os.mkdir(work)
        if os.environ.get("CUMEMTRACE_TEST_DPKG_SYSTEM") == "1" and os.geteuid() == 0:
            run(["dpkg", "-i", deb])
            try:
                trace_with_installed("/usr/bin", "/usr/lib", args.program, args.fake_cuda, work)
            finally:
                run(["dpkg", "-r", "cumemtrace"])
            return 0
        # A scratch dpkg root: the package database there is empty, so dependencies are checked above instead.
        root = os.path.join(tmp, "root")
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
            os.makedirs(os.path.join(root, d))
        open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
        run(["dpkg", "--force-not-root", "--force-depends", "--force-script-chrootless", "--root", root,
             "--log", os.path.join(tmp, "dpkg.log"), "-i", deb])
        trace_with_installed(os.path.join(root, "usr/bin"), os.path.join(root, "usr/lib"), args.program,
                             args.fake_cuda, work)
        print("installed with dpkg --root (set CUMEMTRACE_TEST_DPKG_SYSTEM=1 as root for a real dpkg -i)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["prefix", "deb"])
    parser.add_argument("--build", required=True)
    parser.add_argument("--program", required=True)
    parser.add_argument("--fake-cuda", required=True)
    parser.add_argument("--cpack", default="cpack")
    args = parser.parse_args()
    return mode_prefix(args) or 0 if args.mode == "prefix" else mode_deb(args)


if __name__ == "__main__":
    sys.exit(main())

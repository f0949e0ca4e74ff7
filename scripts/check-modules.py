#!/usr/bin/env python3
"""Check that the module graph in the sources is the one Package.swift declares, and the house rules.

SwiftPM lets a target import a module it only gets by accident (through another target's
dependencies), and keeps a dependency nobody imports; both drift silently until a reorder breaks
the build. For every regular, executable and test target of `swift package dump-package` this
checks, from the `import` lines of its Swift sources (those inside `#if canImport` too; system
modules ignored):

  1. every imported module is declared: a target dependency by name, a product dependency of the
     same name, or a module a declared product exports under another name (PROVIDED_BY below);
  2. every declared dependency is imported by at least one source file;
  3. the house rules: LinkRelayCore imports only system modules (an app takes it as is), ProveSandbox,
     NevisSandbox and LinkRelaySupport stay below the relay, ProveAPI imports none of the relay's modules;
  4. LinkRelayCore compiles alone with a bare swiftc (Swift 6 mode, the package's upcoming
     features, no search paths), which proves it needs nothing but Foundation. `--no-build` skips it.

Prints one `target: message` line per problem and exits 1, or a one-line summary and exits 0.
"""
import glob, json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SYSTEM = {"Foundation", "FoundationEssentials", "FoundationXML", "Dispatch", "Glibc", "Darwin", "Musl",
          "Synchronization", "Testing", "XCTest", "_Concurrency", "os"}

# Modules a declared product brings in under another name: module -> product that provides it.
# (NIOEmbedded, NIOPosix, WSClient, ... are products of their own and need no entry.)
PROVIDED_BY = {
    # sqlite-nio's SQLiteNIO product depends on its C target; the relay's SQLite writer uses the C API.
    "VaporCSQLite": "SQLiteNIO",
}

RELAY = {"LinkRelayCore", "LinkRelaySupport", "LinkRelayServer", "ProveAPI", "ProveSandbox", "NevisSandbox"}
ONLY_SYSTEM = {"LinkRelayCore"}  # the domain: Foundation only
FORBIDDEN = {  # target -> modules it must not import
    "ProveSandbox": {"LinkRelayCore"},
    "NevisSandbox": {"LinkRelayCore", "LinkRelayServer"},
    "LinkRelaySupport": {"LinkRelayCore", "LinkRelayServer", "ProveAPI", "ProveSandbox"},
    "ProveAPI": RELAY - {"ProveAPI"},
}

# `import X`, `@testable import X`, `@_exported import X`, `@preconcurrency import X`, `public import X`,
# `import struct X.Y`: the module is the first component after `import` (and an optional kind).
IMPORT = re.compile(r"^\s*(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
                    r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?(\w+)", re.M)


def imports_of(directory):
    """module -> first file (relative to ROOT) that imports it, for the Swift sources under directory."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, directory, "**", "*.swift"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)  # an import in a block comment is not one
        for module in IMPORT.findall(text):
            if module not in SYSTEM:
                found.setdefault(module, os.path.relpath(path, ROOT))
    return found


def check_imports(package):
    problems, targets = [], [t for t in package["targets"] if t["type"] in ("regular", "executable", "test")]
    for t in targets:
        name = t["name"]
        path = t.get("path") or os.path.join("Tests" if t["type"] == "test" else "Sources", name)
        # byName / target / product: the first field is the target's or the product's name.
        declared = {next(iter(d.values()))[0] for d in t["dependencies"]}
        imported = imports_of(path)
        for module, where in sorted(imported.items()):
            if module not in declared and PROVIDED_BY.get(module) not in declared:
                problems.append(f"{name}: imports {module} ({where}) but does not declare it in Package.swift")
            if name in ONLY_SYSTEM or module in FORBIDDEN.get(name, ()):
                problems.append(f"{name}: must not import {module} ({where}): house rule")
        for dep in sorted(declared):
            if dep not in imported and dep not in {PROVIDED_BY.get(module) for module in imported}:
                problems.append(f"{name}: declares {dep} but no source file in {path} imports it")
    return len(targets), problems


def check_core_builds_alone(package):
    core = next(t for t in package["targets"] if t["name"] == "LinkRelayCore")
    features = [s["kind"]["enableUpcomingFeature"]["_0"] for s in core.get("settings", [])
                if "enableUpcomingFeature" in s["kind"]]
    sources = sorted(glob.glob(os.path.join(ROOT, core.get("path") or "Sources/LinkRelayCore", "**", "*.swift"),
                               recursive=True))
    with tempfile.TemporaryDirectory() as tmp:
        command = ["swiftc", "-parse-as-library", "-module-name", "LinkRelayCore", "-swift-version", "6",
                   *[a for f in features for a in ("-enable-upcoming-feature", f)],
                   "-emit-module", "-emit-module-path", os.path.join(tmp, "LinkRelayCore.swiftmodule"),
                   "-emit-library", "-o", os.path.join(tmp, "libLinkRelayCore.so"), *sources]
        result = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
    if result.returncode == 0:
        return []
    output = (result.stdout + result.stderr).replace(ROOT + os.sep, "").splitlines()
    errors = list(dict.fromkeys(line for line in output if ": error: " in line)) or output[-1:]
    return [f"LinkRelayCore: does not build alone with swiftc: {error.strip()}" for error in errors]


def main():
    build = "--no-build" not in sys.argv[1:]
    # A scratch path of its own: dump-package otherwise waits for the lock on .build while a build runs.
    with tempfile.TemporaryDirectory() as scratch:
        dump = subprocess.run(["swift", "package", "--scratch-path", scratch, "dump-package"], cwd=ROOT,
                              check=True, stdout=subprocess.PIPE, text=True)
    package = json.loads(dump.stdout)
    count, problems = check_imports(package)
    if build:
        problems += check_core_builds_alone(package)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"modules: {count} targets, imports match Package.swift"
          + ("; LinkRelayCore builds alone" if build else " (LinkRelayCore build skipped)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#if canImport(Glibc)
    import Glibc

    /// Settings that a process reads only when it starts: `serve` starts itself once more (an `exec`:
    /// same process id, arguments and environment) with them added to its environment.
    enum StartEnvironment {
        /// Replaces this process with the same program, arguments and environment plus `wanted`.
        /// Returns only when the environment already has them or the `exec` failed; the relay then runs on.
        static func restart(with wanted: [String: String]) {
            let changes = wanted.filter { value($0.key) != $0.value }
            guard !changes.isEmpty else { return }
            let before = changes.keys.map { ($0, value($0)) }
            for (name, value) in changes { setenv(name, value, 1) }
            // By its path, not /proc/self/exe: the kernel names the process after the file it runs
            // (`ps`, `top`, `pkill linkrelay`).
            let program = realpath("/proc/self/exe", nil).map { path in
                defer { free(path) }
                return String(cString: path)
            }
            execv(program ?? "/proc/self/exe", CommandLine.unsafeArgv)
            // The exec failed: leave the environment as it was.
            for (name, value) in before {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }

        static func value(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
    }

    /// glibc's per-thread caches of small blocks, turned off for the relay's process unless
    /// `--malloc-tuning off`.
    ///
    /// Each thread keeps up to 7 freed blocks of each small size for its next allocation; after a burst
    /// the event loops go quiet holding them, spread over the pages the burst used, which `malloc_trim`
    /// cannot return. Without the caches, memory after a burst comes back near idle (docs/memory.md
    /// has the trade). glibc reads its tunables only when a process starts: `glibc.malloc.tcache_count=0`
    /// is added to `GLIBC_TUNABLES` for `StartEnvironment`, unless that variable already sets the count.
    enum MallocTunables {
        static let setting = "glibc.malloc.tcache_count=0"

        /// `GLIBC_TUNABLES` as this process runs with it (`/proc/PID/environ` may show it cut short:
        /// glibc ends each setting it reads there with a NUL).
        static var current: String? { StartEnvironment.value("GLIBC_TUNABLES") }

        /// The `GLIBC_TUNABLES` to run with.
        static var wanted: String {
            guard let current, !current.isEmpty else { return setting }
            return current.contains("glibc.malloc.tcache_count=") ? current : current + ":" + setting
        }
    }
#endif

#if canImport(Glibc)
    import Glibc

    /// glibc's per-thread caches of small blocks, turned off for the relay's process unless
    /// `--malloc-tuning off`.
    ///
    /// Each thread keeps up to 7 freed blocks of each small size for its next allocation; after a burst
    /// the event loops go quiet holding them, spread over the pages the burst used, which `malloc_trim`
    /// cannot return. Without the caches, memory after a burst comes back near idle (docs/memory.md
    /// has the trade).
    ///
    /// glibc reads its tunables only when a process starts, so the relay starts itself once more (an
    /// `exec`: same process id, arguments and environment) with `glibc.malloc.tcache_count=0` added to
    /// `GLIBC_TUNABLES`, unless that variable already sets the count.
    enum MallocTunables {
        static let setting = "glibc.malloc.tcache_count=0"

        /// The `GLIBC_TUNABLES` to start again with, or nil to run on as is.
        private static func restartValue(current: String?) -> String? {
            guard let current, !current.isEmpty else { return setting }
            return current.contains("glibc.malloc.tcache_count=") ? nil : current + ":" + setting
        }

        /// `GLIBC_TUNABLES` as this process runs with it (`/proc/PID/environ` may show it cut short:
        /// glibc ends each setting it reads there with a NUL).
        static var current: String? { getenv("GLIBC_TUNABLES").map { String(cString: $0) } }

        /// Replaces this process with the same program, arguments and environment plus the setting.
        /// Returns only when there is nothing to change or the `exec` failed; the relay then runs on.
        static func restartIfNeeded() {
            let current = current
            guard let value = restartValue(current: current) else { return }
            setenv("GLIBC_TUNABLES", value, 1)
            execv("/proc/self/exe", CommandLine.unsafeArgv)
            // The exec failed: leave the environment as it was.
            if let current { setenv("GLIBC_TUNABLES", current, 1) } else { unsetenv("GLIBC_TUNABLES") }
        }
    }
#endif

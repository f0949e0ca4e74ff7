#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value guarded by a pthread mutex: the lock of every shared state in the relay.
///
/// Not `Synchronization.Mutex`, because on Linux that lock is invisible to ThreadSanitizer (its
/// futex calls are not intercepted): every access made under it is reported as a data race, and a
/// real race would drown among them. A pthread mutex costs the same and TSan understands it.
///
/// `withLock` is inlinable, so that the modules using it compile it for their own values; otherwise
/// every call runs generic code that looks up the value's type at run time.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var guarded: Value

    public init(_ value: Value) {
        guarded = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// The value as it is now.
    public var value: Value { withLock { $0 } }

    /// Runs `body` with the value, holding the lock. Never await or block in `body`. Throws what `body`
    /// throws, typed as `body` types it.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&guarded)
    }
}

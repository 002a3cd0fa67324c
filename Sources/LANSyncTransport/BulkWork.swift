import NIOPosix

/// Where a catch-up's CPU-heavy steps run: reading and encoding batches to send, decoding and
/// checking batches received; and the agent's one blocking file write (`peers.json`, whose
/// fsync can take milliseconds). Two threads of their own, at a lower scheduling priority (nice 10).
///
/// Why: the app that embeds the node must stay fast while a large catch-up runs (a tap is logged
/// in a few milliseconds). On Swift's cooperative pool, as wide as the machine has cores, a batch
/// being decoded occupies a thread the app's next append needs, and nothing preempts it (a
/// 2,000-row batch takes a few milliseconds to decode and check). On these threads the kernel preempts bulk
/// work as soon as an app thread wakes, and bulk work still has every cycle the app leaves idle.
/// The writer (SQLite's one connection that writes) keeps normal priority: appends share it.
package enum BulkWork {
    static let threads = 2
    /// A nice value of 10 weighs about a tenth of the default in the kernel's fair scheduler.
    static let niceness: Int32 = 10

    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        return pool
    }()

    /// Runs `body` on a bulk-work thread and returns its result.
    package static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive {
            ThreadPriority.lowerCurrentThread(to: niceness)
            return try body()
        }
    }
}

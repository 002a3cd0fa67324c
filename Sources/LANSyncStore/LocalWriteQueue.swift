import Synchronization

/// Local writes (appends, preference changes) waiting for the writer, and the rule that lets
/// them ride along with a merge.
///
/// SQLite has one writer, and every commit costs a disk flush plus the pages it touched. A local
/// write queues here and also asks the writer for a transaction of its own. When a merge
/// transaction is under way, it takes the waiting writes into itself every few rows and commits
/// within `rideAlongDelay` of taking the first: the app's write waits about a couple of
/// milliseconds instead of a whole merge transaction, and a busy app and a large catch-up share
/// commits instead of each paying for their own. The write's own transaction, when its turn
/// comes, finds the queue empty and does nothing. If the merge transaction fails (a peer's bad
/// delta), the writes it took go back to the queue, and their own transaction commits them.
final class LocalWriteQueue: Sendable {
    /// How long a merge transaction may keep running after it took a local write: the longest a
    /// write waits for its commit because a merge was under way.
    static let rideAlongDelay = Duration.microseconds(500)
    /// Merged rows between two looks at the queue (a look is an atomic load).
    static let rowsBetweenLooks = 16
    /// How long after the app's last write a merge still counts it as writing, and keeps its
    /// transactions short for the next one (see `MergePacer`): an app that writes every second
    /// or so (a rowing session, a tap log in use) is writing throughout.
    static let writingWindow = Duration.seconds(2)

    private let waiting = Mutex<[LocalWrite]>([])
    private let count = Atomic<Int>(0)
    private let origin = ContinuousClock.now
    /// When the last write was added, in nanoseconds since `origin`; never: far in the past.
    private let lastAdded = Atomic<Int>(Int.min / 2)

    func add(_ write: LocalWrite) {
        lastAdded.store((ContinuousClock.now - origin).nanoseconds, ordering: .relaxed)
        waiting.withLock { $0.append(write) }
        count.add(1, ordering: .releasing)
    }

    /// Whether the app wrote within `writingWindow`.
    var appIsWriting: Bool {
        (ContinuousClock.now - origin).nanoseconds - lastAdded.load(ordering: .relaxed) < Self.writingWindow.nanoseconds
    }

    /// Whether any write waits; cheap enough to ask every few rows.
    var hasWaiting: Bool { count.load(ordering: .acquiring) > 0 }

    func takeAll() -> [LocalWrite] {
        waiting.withLock { queue in
            let taken = queue
            queue.removeAll()
            count.subtract(taken.count, ordering: .relaxed)
            return taken
        }
    }

    /// Returns writes that a failed transaction had taken, ahead of any that came later.
    func putBack(_ writes: [LocalWrite]) {
        guard !writes.isEmpty else { return }
        waiting.withLock { $0.insert(contentsOf: writes, at: 0) }
        count.add(writes.count, ordering: .releasing)
    }
}

/// One local write waiting for a transaction: what to do inside it, and how to tell the caller.
struct LocalWrite: Sendable {
    /// Applies the write inside whichever transaction takes it; returns what reports success
    /// once that transaction has committed.
    let apply: @Sendable (inout WriteContext) throws -> @Sendable () -> Void
    /// Reports that the transaction carrying the write failed: nothing of it was written.
    let fail: @Sendable (any Error) -> Void
}

/// The local writes one transaction took, applied, and reports once it commits.
struct TakenWrites {
    private(set) var writes: [LocalWrite] = []
    private var reports: [@Sendable () -> Void] = []
    /// When the first write was taken: the transaction commits `rideAlongDelay` later at most.
    private(set) var firstTaken: ContinuousClock.Instant?

    /// Takes every waiting write into `context`'s transaction.
    mutating func take(from queue: LocalWriteQueue, into context: inout WriteContext) throws {
        guard queue.hasWaiting else { return }
        let taken = queue.takeAll()
        guard !taken.isEmpty else { return }
        if firstTaken == nil { firstTaken = .now }
        for (index, write) in taken.enumerated() {
            do {
                reports.append(try write.apply(&context))
                writes.append(write)
            } catch let failure as IsolatedWriteFailure {
                // Undone alone (an app's SQL that failed): the others go on.
                write.fail(failure.error)
            } catch {
                // The transaction is lost: the caller fails or puts back every write it took.
                writes += taken[index...]
                throw error
            }
        }
    }

    /// True once a write has waited long enough: the transaction should commit now.
    var isDue: Bool {
        guard let firstTaken else { return false }
        return ContinuousClock.now - firstTaken >= LocalWriteQueue.rideAlongDelay
    }

    /// Tells every caller its write is durable (after COMMIT).
    func reportCommitted() { for report in reports { report() } }
}

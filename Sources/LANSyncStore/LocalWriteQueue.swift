import Synchronization

/// Local writes (appends, preference changes) waiting for the writer, and the rule that makes a
/// merge make way for them.
///
/// SQLite has one writer, and every commit of the app's writes costs a disk flush. A local write
/// queues here and asks the writer for a transaction of its own; writes that wait together share
/// that transaction and its flush (group commit). When a merge transaction is under way, it looks
/// at the queue every few rows and commits within `yieldDelay` of first seeing a write waiting:
/// the app's write waits that long for the merge instead of a whole merge transaction, and its
/// own transaction comes next on the writer.
///
/// A merge's transactions commit without flushing the WAL (see `Database.commitForMerge`), and
/// what one commits is visible to readers at once. The app's writes never ride in them: a
/// session could send a write to a peer before it is on disk, and after a power cut this
/// replica would give the same dot to another write. A transaction of the app's writes is
/// durable before any reader sees it.
final class LocalWriteQueue: Sendable {
    /// How long a merge transaction keeps running after it first saw a local write waiting: the
    /// longest a write waits for a merge transaction because one was under way. Not zero, so
    /// that a merge still gets on while the app writes without pause (each look comes after 16
    /// rows, about 0.1 ms).
    static let yieldDelay = Duration.microseconds(500)
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

    /// Takes every waiting write into `context`'s transaction.
    mutating func take(from queue: LocalWriteQueue, into context: inout WriteContext) throws {
        guard queue.hasWaiting else { return }
        let taken = queue.takeAll()
        guard !taken.isEmpty else { return }
        for (index, write) in taken.enumerated() {
            do {
                reports.append(try write.apply(&context))
                writes.append(write)
            } catch let failure as IsolatedWriteFailure {
                // Undone alone (an app's SQL that failed): the others go on.
                write.fail(failure.error)
            } catch {
                // The transaction is lost: the caller fails every write it took.
                writes += taken[index...]
                throw error
            }
        }
    }

    /// Tells every caller its write is durable (after COMMIT).
    func reportCommitted() { for report in reports { report() } }
}

/// A merge transaction's watch on the queue: when it should commit to let waiting writes in.
struct MergeYield {
    /// When this transaction first saw a write waiting.
    private var firstSeen: ContinuousClock.Instant?

    /// Looks at the queue after every `LocalWriteQueue.rowsBetweenLooks` rows; true once a write
    /// has been waiting `LocalWriteQueue.yieldDelay` since this transaction first saw it.
    mutating func isDue(afterRows rows: Int, queue: LocalWriteQueue) -> Bool {
        guard rows % LocalWriteQueue.rowsBetweenLooks == 0, queue.hasWaiting else { return false }
        let now = ContinuousClock.now
        guard let firstSeen else {
            firstSeen = now
            return false
        }
        return now - firstSeen >= LocalWriteQueue.yieldDelay
    }
}

import Dispatch
import GRDB
import Synchronization

/// Moves WAL checkpoints off the writer.
///
/// SQLite's automatic checkpoint runs inside whichever commit pushes the WAL past its threshold:
/// that commit (often a local append queued behind a merge) then copies megabytes into the
/// database file and flushes it, a pause of several milliseconds. Instead the writer connection
/// has `wal_autocheckpoint = 0`, and every `commitsPerCheckpoint` commits this runs a PASSIVE
/// checkpoint on its own connection and thread, which never blocks readers or writers. When the
/// last connection closes SQLite checkpoints and removes the WAL as usual.
///
/// Checkpoints are frequent and therefore small. A checkpoint ends by flushing the database
/// file, and on ext4 the writer's next flush of the WAL can be held until that data is on disk:
/// during a million-entry catch-up, with a checkpoint every 32 commits (each copying what 32
/// merge transactions wrote) a local append waited 60–140 ms in about one run in five; every 4
/// commits, no such pause was seen in nine runs and the catch-up was as fast. Commits are counted
/// where they happen: a merge's transactions, and local-write transactions that wrote something.
final class Checkpointer: Sendable {
    static let commitsPerCheckpoint = 4

    private let path: String
    private let queue = DispatchQueue(label: "lansync.checkpoint", qos: .utility)
    private let commits = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    private let connection = Mutex<DatabaseQueue?>(nil)

    init(path: String) { self.path = path }

    /// Counts a commit, and starts a checkpoint in the background when one is due and none runs.
    func committed() {
        let count = commits.add(1, ordering: .relaxed).newValue
        guard count % Self.commitsPerCheckpoint == 0 else { return }
        guard running.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        queue.async { [self] in
            defer { running.store(false, ordering: .releasing) }
            checkpoint()
        }
    }

    private func checkpoint() {
        connection.withLock { connection in
            do {
                if connection == nil {
                    var configuration = Configuration()
                    configuration.label = "lansync.checkpoint"
                    connection = try DatabaseQueue(path: path, configuration: configuration)
                }
                try connection?.writeWithoutTransaction { db in
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
                }
            } catch {
                // A checkpoint that cannot run now (busy, closing) is retried at the next one due;
                // the WAL only grows a little meanwhile and nothing is lost.
            }
        }
    }
}

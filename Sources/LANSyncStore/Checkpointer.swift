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
///
/// A writer that never pauses keeps the WAL from ever starting over: SQLite rewinds the WAL to
/// its start only in a write transaction that began when every frame had been checkpointed, and
/// with a background checkpoint always a commit or two behind, that never happens. The WAL then
/// grows by everything a catch-up writes (250 MB for a million entries), and every frame goes to
/// a new part of the file, which the kernel must allocate and zero first. So a merge, once the
/// WAL passes `rewindBytes`, waits between two transactions for a checkpoint of everything
/// (`checkpointBeforeRewind()`); its next transaction rewinds the WAL, and the file's pages,
/// already cached, are written over. The WAL stays near 32 MB, and the 1M catch-up is faster
/// (docs/journal/2026-11-speed.md).
final class Checkpointer: Sendable {
    static let commitsPerCheckpoint = 4
    /// WAL bytes past which a merge lets the checkpoint catch up: 32 MiB, whatever the page size
    /// (a count of frames let the WAL of a replica with 16 KiB pages grow to 128 MiB, and the
    /// million-entry catch-up was slower). Tests set a smaller one.
    let rewindBytes = Atomic<Int>(32 << 20)

    private let path: String
    private let queue = DispatchQueue(label: "lansync.checkpoint", qos: .utility)
    private let commits = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    private let connection = Mutex<DatabaseQueue?>(nil)
    /// Frames in the WAL when the last checkpoint ran.
    private let walFrames = Atomic<Int>(0)
    /// The bytes of a WAL frame: the replica's page and the frame's 24-byte header.
    private let frameBytes = Atomic<Int>(4_096 + 24)

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

    /// When the WAL has grown past `rewindBytes`: checkpoints everything committed so far and
    /// returns once done, so that the caller's next write transaction rewinds the WAL. Runs on
    /// the checkpoint thread, after any checkpoint already under way; the caller holds no
    /// transaction meanwhile, so the app's writes still commit.
    func checkpointBeforeRewind() async {
        guard
            walFrames.load(ordering: .relaxed) * frameBytes.load(ordering: .relaxed)
                > rewindBytes.load(ordering: .relaxed)
        else { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                checkpoint()
                // The next write transaction rewinds the WAL: no more waiting until a checkpoint
                // says it has grown again (a reader in the way can put the rewind off).
                walFrames.store(0, ordering: .relaxed)
                done.resume()
            }
        }
    }

    private func checkpoint() {
        connection.withLock { connection in
            do {
                if connection == nil {
                    var configuration = Configuration()
                    configuration.label = "lansync.checkpoint"
                    connection = try DatabaseQueue(path: path, configuration: configuration)
                    if let pageSize = try connection?.read({ try Int.fetchOne($0, sql: "PRAGMA page_size") }) {
                        frameBytes.store(pageSize + 24, ordering: .relaxed)
                    }
                }
                try connection?.writeWithoutTransaction { db in
                    // One row: busy flag, frames in the WAL, frames checkpointed.
                    if let row = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)") {
                        walFrames.store(row[1] ?? 0, ordering: .relaxed)
                    }
                }
            } catch {
                // A checkpoint that cannot run now (busy, closing) is retried at the next one due;
                // the WAL only grows a little meanwhile and nothing is lost.
            }
        }
    }
}

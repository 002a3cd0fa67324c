import Foundation
import LANSyncStore

/// Calls back when a node's replica changed on disk, whoever committed: the agent learns so of
/// writes by other processes (an app embedding LANSync, the CLI, a script) and pushes them, and
/// a node an app observes tells GRDB of commits it cannot see (the agent merging a peer's rows
/// while it runs as `lansync run`), so live queries see them.
///
/// A thread sleeps in inotify (`FileWatch`) until one of the replica's files is written (every
/// commit in WAL mode writes the `-wal` file), at most 20 looks a second while the replica is
/// busy and none while it is idle; where inotify is unavailable it looks every second. Each
/// look reads the replica's change marker (digest and clock) and calls `onChange` when it moved.
///
/// The kernel reports a commit's write to the WAL before readers can see the commit: SQLite
/// flushes the WAL between the two. So after a write the marker is looked at again, at growing
/// intervals (`looksAfterAWrite`), until it moves; a single look 50 ms later missed a commit
/// whose flush took longer on a busy disk, and nothing told of it until the next write.
package final class ReplicaChangeWatch: Sendable {
    private let watch: FileWatch?
    private let stopped = SharedFlag(false)

    /// The pauses before each look after the replica's files were written, in microseconds:
    /// 6.35 s in all, long enough for a flush on a busy disk; a write that commits nothing (a
    /// transaction that spilled to the WAL and rolled back) costs seven looks.
    static let looksAfterAWrite: [UInt32] = [50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000]

    /// Whether the kernel reports the writes (else the replica is looked at every second).
    package var usesInotify: Bool { watch != nil }

    package convenience init(
        store: ReplicaStore,
        dataDirectory: DataDirectory,
        onChange: @escaping @Sendable () -> Void
    ) {
        self.init(
            directory: dataDirectory.path,
            filesNamed: URL(fileURLWithPath: dataDirectory.replicaPath).lastPathComponent,
            marker: { try? store.changeMarker() },
            onChange: onChange
        )
    }

    /// Watches the files in `directory` whose names start with `filesNamed`, and looks at
    /// `marker` (nil: could not be read, which counts as a change) after they are written.
    package init(
        directory: String,
        filesNamed prefix: String,
        marker readMarker: @escaping @Sendable () -> [UInt8]?,
        onChange: @escaping @Sendable () -> Void
    ) {
        let watch = FileWatch.directory(directory)
        self.watch = watch
        // The marker the watch starts from is read here, after the kernel watches the files and
        // before `init` returns: a commit made after `init` always differs from it (read on the
        // thread, it could include a commit made meanwhile, which was then never reported).
        let start = readMarker()
        let thread = Thread { [stopped] in
            var marker = start
            while !stopped.value {
                if let watch {
                    guard let names = watch.waitForChanges() else { return }
                    guard names.contains(where: { $0.hasPrefix(prefix) }) else { continue }
                }
                for pause in watch == nil ? [1_000_000] : Self.looksAfterAWrite {
                    usleep(pause)
                    guard !stopped.value else { return }
                    let current = readMarker()
                    guard current != marker else { continue }
                    marker = current
                    onChange()
                    break
                }
            }
        }
        thread.name = "lansync-replica-watch"
        thread.start()
    }

    /// Ends the watch for good; `onChange` is not called after it returns a look.
    package func stop() {
        stopped.value = true
        watch?.stop()
    }
}

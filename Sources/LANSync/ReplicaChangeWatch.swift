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
package final class ReplicaChangeWatch: Sendable {
    private let watch: FileWatch?
    private let stopped = SharedFlag(false)

    /// Whether the kernel reports the writes (else the replica is looked at every second).
    package var usesInotify: Bool { watch != nil }

    package init(store: ReplicaStore, dataDirectory: DataDirectory, onChange: @escaping @Sendable () -> Void) {
        let replicaFile = URL(fileURLWithPath: dataDirectory.replicaPath).lastPathComponent
        let watch = FileWatch.directory(dataDirectory.path)
        self.watch = watch
        // The marker the watch starts from is read here, after the kernel watches the files and
        // before `init` returns: a commit made after `init` always differs from it (read on the
        // thread, it could include a commit made meanwhile, which was then never reported).
        let start = try? store.changeMarker()
        let thread = Thread { [stopped] in
            var marker = start
            while !stopped.value {
                if let watch {
                    guard let names = watch.waitForChanges() else { return }
                    guard names.contains(where: { $0.hasPrefix(replicaFile) }) else { continue }
                    usleep(50_000)
                } else {
                    sleep(1)
                }
                let current = try? store.changeMarker()
                guard current != marker, !stopped.value else { continue }
                marker = current
                onChange()
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

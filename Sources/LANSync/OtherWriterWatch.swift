import Foundation
import LANSyncStore
import Synchronization

/// Commits to a node's replica by other processes — the agent merging a peer's rows, the CLI, a
/// script — made visible to the app's live queries. SQLite tells GRDB only of commits made
/// through the node's own connections, so a `ValueObservation` on `LANSyncNode.database` would
/// otherwise never see a merged row while the agent runs as its own process (`lansync run`).
///
/// A thread sleeps in inotify (`FileWatch`) until one of the replica's files is written; when the
/// replica's change marker (its digest and clock) moved, it tells the observers
/// (`ReplicaStore.notifyObserversOfChangesElsewhere`). Started by the first use of `database`,
/// stopped with the node. Where inotify is unavailable it looks every second.
final class OtherWriterWatch: Sendable {
    private let watch: FileWatch?
    private let stopped = Stopped()

    init(store: ReplicaStore, directory: String, replicaFile: String) {
        watch = FileWatch.directory(directory)
        let (watch, stopped) = (watch, stopped)
        let thread = Thread {
            var marker = try? store.changeMarker()
            while !stopped.value {
                if let watch {
                    guard let names = watch.waitForChanges() else { return }
                    guard names.contains(where: { $0.hasPrefix(replicaFile) }) else { continue }
                    // At most 20 looks a second while the replica is busy.
                    usleep(50_000)
                } else {
                    sleep(1)
                }
                let current = try? store.changeMarker()
                guard current != marker else { continue }
                marker = current
                try? store.notifyObserversOfChangesElsewhere()
            }
        }
        thread.name = "lansync-observers"
        thread.start()
    }

    func stop() {
        stopped.set()
        watch?.stop()
    }

    /// A flag the watching thread reads.
    private final class Stopped: Sendable {
        private let flag = Mutex(false)
        var value: Bool { flag.withLock { $0 } }
        func set() { flag.withLock { $0 = true } }
    }
}

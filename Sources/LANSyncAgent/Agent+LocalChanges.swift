import Foundation
import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
import LANSyncWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Local changes: every commit to the replica, by this process or another, wakes every session.
extension Agent {
    /// Pushes to every peer as soon as this replica changes: through the library (change feed),
    /// or through another process (the CLI kicks the agent over the control socket after writing;
    /// any other writer is noticed through the replica's files changing, `FileWatch`). Nothing here
    /// wakes on a timer.
    func watchChanges() async {
        // A local change goes to peers once this replica's signed chain covers it: a small
        // commit extends the chain itself (`extendChainInCommits`), and then the push goes at
        // once; otherwise (a bulk insert, another process's write) the chain is extended here
        // first, off the writes' path. Wake-ups that come while that runs fold into one.
        let (chainWakes, wakeChain) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        wakeChain.yield()
        let ownLeftRecord = MemberKeys.left(node.deviceID.description)
        await withDiscardingTaskGroup { tasks in
            tasks.addTask {
                for await change in self.node.changes() {
                    // Records of a new epoch (merged from a member that handed them over) may
                    // seal its key to this device.
                    if case .preferences(let writes, _) = change, Self.touchEpochs(writes) { await self.reloadGroup() }
                    // This device's "left" record from before it joined again (a reinstall, say,
                    // learns it from a member): it says it is back.
                    if case .preferences(let writes, _) = change, !change.isLocal,
                        writes.contains(where: { $0.key == ownLeftRecord })
                    {
                        try? await self.node.announceReturnIfLeft()
                    }
                    if change.isLocal { wakeChain.yield() } else { await self.pushAll() }
                }
                wakeChain.finish()
            }
            tasks.addTask {
                for await _ in chainWakes {
                    if self.node.store.chainCoversKnownWrites {
                        await self.pushAll()
                    } else {
                        await self.pushToAllPeers()
                    }
                }
            }
            tasks.addTask {
                await self.watchOtherWriters(onChange: {
                    self.node.store.noteWriteByAnotherProcess()
                    wakeChain.yield()
                })
            }
        }
    }

    /// Writes by other processes to this replica (`ReplicaChangeWatch`: inotify on its files,
    /// then its change marker). The CLI's writes are announced at once over the control socket too.
    nonisolated func watchOtherWriters(onChange: @escaping @Sendable () -> Void) async {
        let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let watch = ReplicaChangeWatch(store: node.store, dataDirectory: node.dataDirectory) { changed.yield() }
        if !watch.usesInotify {
            logger.notice("inotify is unavailable; checking the replica for other writers every second")
        }
        await withTaskCancellationHandler {
            for await _ in changes {
                onChange()
                await pushAll()
            }
        } onCancel: {
            watch.stop()
            changed.finish()
        }
    }

    func pushAll() {
        ourStateCache.changed()
        for registered in sessions.all { registered.session.push() }
    }

    /// Pushes whatever each connected peer lacks (after a local write, or one by another
    /// process): this replica's chain is extended over its changes first, since only signed
    /// ranges are sent.
    public func pushToAllPeers() async {
        do {
            try await node.store.extendOwnChain()
        } catch {
            // Cancelled, the agent is stopping: its sessions end, and the next start extends the
            // chain over what is left (`lansync run` used to end with this warning).
            if Task.isCancelled { return }
            logger.warning("could not extend this replica's change chain: \(error)")
        }
        pushAll()
    }
}

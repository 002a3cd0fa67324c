import Foundation
import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
import LANSyncTransport
import LANSyncWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Dialing: keeping static and discovered peers connected, with backoff, and dialing again at
/// once when the network comes back.
extension Agent {
    /// Keeps a peer connected: dial, sync until the connection ends, wait, dial again, with
    /// exponential backoff and jitter while it cannot be reached. A discovered peer's loop ends
    /// once the peer has left mDNS and its connection has ended.
    func dialLoop(_ target: DialTarget) async {
        var backoff = configuration.minBackoff
        while !Task.isCancelled, let endpoints = dialEndpoints(target), !endpoints.isEmpty {
            if let replica = targetReplica[target.key], sessions[replica] != nil {
                // Already connected (perhaps the peer dialed us): dial again once that connection ends.
                await waitUntilDisconnected(replica)
                continue
            }
            let started = ContinuousClock.now
            var outcome: (any Error)? = nil
            for endpoint in endpoints {
                await directory.address(endpoint.description, state: .dialing)
                do {
                    let bootstrap = ClientBootstrap(group: eventLoops).connectTimeout(.seconds(5))
                        .channelOption(
                            Self.tcpUserTimeout,
                            value: Self.milliseconds(configuration.unacknowledgedTimeout)
                        )
                    let channel = try await endpoint.connect(bootstrap) { channel in
                        channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
                    }
                    dialing(target, connected: true)
                    outcome = await run(channel, keys: dialKeys(target), address: endpoint.description, dialed: target)
                    dialing(target, connected: false)
                    if case .connectedToSelf? = outcome as? ConnectionError, case .discovered(let name) = target {
                        // Our own record under that address; the name's other addresses may be a peer's.
                        discovery.dialReachedOurselves(name, at: endpoint.description)
                        continue
                    }
                    if ContinuousClock.now - started > .seconds(10) { backoff = configuration.minBackoff }
                    break
                } catch {
                    outcome = error
                    await directory.address(endpoint.description, state: .unreachable, error: "\(error)")
                    logger.debug("peer unreachable", metadata: ["peer.address": "\(endpoint)", "error": "\(error)"])
                }
            }
            if case .discovered(let name) = target {
                switch discovery.dialEnded(name, outcome: outcome as? ConnectionError) {
                case .dialAgain: break
                case .refusedUntilChanged:
                    logger.info(
                        "not dialing a refused device again until its mDNS record changes",
                        metadata: ["mdns.name": "\(name)"]
                    )
                    return
                case .ownAdvertisement:
                    if name != discovery.advertisedAs {
                        // A name we gave up in a collision, resolved to our withdrawn record: the
                        // peer that holds it now is found by resolving it again.
                        discovery.resolveAgain?.yield(name)
                    }
                    return
                }
            }
            let jitter = Double.random(in: 0.8...1.2)
            if await sleepUnlessWoken(backoff * jitter) {
                backoff = configuration.minBackoff
            } else {
                backoff = min(backoff * 2, configuration.maxBackoff)
            }
        }
    }

    func remember(_ target: DialTarget, replica: ReplicaID) { targetReplica[target.key] = replica }

    /// A connection that has heard nothing for longer than a ping interval: it is stuck (in an
    /// outage, or in TCP retransmission backoff after one), though not yet closed by keepalive.
    func isStuck(lastHeard: ContinuousClock.Instant) -> Bool {
        ContinuousClock.now - lastHeard > configuration.keepalive + .milliseconds(500)
    }

    /// Sleeps for `duration`; returns true early when the network came back meanwhile.
    func sleepUnlessWoken(_ duration: Duration) async -> Bool {
        let id = nextWaiter
        nextWaiter += 1
        return await withDiscardingTaskGroup { timer in
            // The timer ends the wait with false when the time is up, and also when the dial loop
            // is cancelled (a child task is cancelled with it, and its sleep ends at once). The
            // network coming back ends it first, with true (`wakeDialers`). A second resume finds
            // the waiter gone.
            timer.addTask {
                try? await Task.sleep(for: duration)
                await self.resumeWaiter(id, woken: false)
            }
            let woken = await withCheckedContinuation { continuation in
                if Task.isCancelled { continuation.resume(returning: false) } else { networkWaiters[id] = continuation }
            }
            timer.cancelAll()
            return woken
        }
    }

    func resumeWaiter(_ id: Int, woken: Bool) {
        networkWaiters.removeValue(forKey: id)?.resume(returning: woken)
    }

    /// Returns once no connection to `replica` is registered (or the task is cancelled).
    func waitUntilDisconnected(_ replica: ReplicaID) async {
        guard sessions[replica] != nil else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume()
                } else {
                    sessions.waitForDisconnect(of: replica, continuation)
                }
            }
        } onCancel: {
            Task { await self.resumeDisconnectWaiters(replica) }
        }
    }

    func resumeDisconnectWaiters(_ replica: ReplicaID) { sessions.resumeDisconnectWaiters(replica) }

    /// Wakes every dial loop waiting out its backoff, so it dials now.
    func wakeDialers() {
        for waiter in networkWaiters.values { waiter.resume(returning: true) }
        networkWaiters.removeAll()
    }

    /// A network interface came up: close connections silent for longer than a ping interval
    /// (stuck since the outage) and wake every dial loop so it dials now.
    func networkCameBack() async {
        wakeDialers()
        redialPeersThatLeft()
        for registered in sessions.all {
            let heard = await registered.session.lastReceived
            if isStuck(lastHeard: heard) { registered.close() }
        }
    }

    /// Closes the connection to the peer last reached through `target`, if one is open (its dial
    /// loop then dials again at once). Returns whether there was one.
    @discardableResult
    func closeConnection(to target: DialTarget) -> Bool {
        guard let replica = targetReplica[target.key], let registered = sessions[replica] else { return false }
        registered.close()
        return true
    }
}

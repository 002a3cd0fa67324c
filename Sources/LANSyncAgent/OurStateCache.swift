import LANSyncWire
import Synchronization

/// Our replica's state (version vector, digest, clock) as the sessions announce it: read from the
/// store once per change, not once per session per change. In a group of 24 every commit wakes
/// 23 sessions, and each wants the state; reading it 23 times was most of a burst's CPU.
///
/// Every change is followed by `changed()` before any session is woken for it (the agent calls
/// it as it wakes them all; a session calls it after its own merge commits). A session woken for
/// another reason meanwhile may see the state from just before a commit — true a moment ago,
/// and the wake that follows the commit corrects it.
final class OurStateCache: Sendable {
    private struct Cached {
        var generation: UInt64 = 0
        var state: (generation: UInt64, value: PeerState)?
    }

    private let cached = Mutex(Cached())

    /// The replica changed: the next read goes to the store.
    func changed() { cached.withLock { $0.generation &+= 1 } }

    func read(_ load: () throws -> PeerState) rethrows -> PeerState {
        let generation: UInt64
        switch cached.withLock({ ($0.generation, $0.state) }) {
        case (let current, let state?) where state.generation == current: return state.value
        case (let current, _): generation = current
        }
        let value = try load()
        cached.withLock { cache in
            if cache.generation == generation { cache.state = (generation, value) }
        }
        return value
    }
}

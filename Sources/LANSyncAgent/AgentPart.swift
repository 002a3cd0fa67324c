import ServiceLifecycle
import Synchronization

/// Where one of a running agent's parts stands; `lansync status` shows each.
public enum AgentPartState: String, Codable, Sendable, Equatable {
    /// Started, not serving yet (the listener: not bound yet).
    case starting
    /// Serving.
    case running
    /// Asked to stop; finishing what it does (sessions saying goodbye, peers.json being written).
    case stopping
    /// Stopped when asked.
    case stopped
    /// Ended with an error; `detail` says which.
    case failed
}

/// One part's state, as a report carries it.
public struct AgentPartStatus: Codable, Sendable, Equatable {
    /// The part's name, as `lansync status` shows it (listener, discovery, ...).
    public let name: String
    /// Where the part stands.
    public let state: AgentPartState
    /// What failed, or what the part is waiting for, when there is something to say.
    public let detail: String?
}

/// The parts' states, in the order the parts start. Written by the parts as they move (from any
/// task, hence a lock rather than an actor hop), read by `Agent.report()`.
final class AgentPartStates: Sendable {
    private let states = Mutex<[AgentPartStatus]>([])

    /// Lists the parts in the order they start, before any runs: the group starts them as
    /// concurrent tasks, so their first updates can arrive in any order.
    func declare(_ names: [String]) {
        states.withLock { states in
            for name in names where !states.contains(where: { $0.name == name }) {
                states.append(AgentPartStatus(name: name, state: .starting, detail: nil))
            }
        }
    }

    func set(_ name: String, _ state: AgentPartState, detail: String? = nil) {
        states.withLock { states in
            let status = AgentPartStatus(name: name, state: state, detail: detail)
            if let index = states.firstIndex(where: { $0.name == name }) {
                states[index] = status
            } else {
                states.append(status)
            }
        }
    }

    var all: [AgentPartStatus] { states.withLock { $0 } }
}

/// One long-lived part of a running agent — the peer directory, the sync listener, the control
/// socket, the watch on local changes, the network watch, discovery, the static peers — as a
/// service of the agent's `ServiceGroup` (`Agent.run`). The group starts the parts in that
/// order and stops them in reverse: dialing stops first, then discovery and the watches, then
/// the listener's sessions say goodbye, and the peer directory is written last, once every
/// session has recorded how it ended.
///
/// `work` does the part's job until its task is cancelled (a graceful shutdown cancels it), and
/// calls `ready` once it serves.
struct AgentPart: Service {
    let name: String
    let states: AgentPartStates
    let work: @Sendable (_ ready: @escaping @Sendable () -> Void) async throws -> Void

    func run() async throws {
        let (name, states, work) = (name, states, work)
        states.set(name, .starting)
        do {
            try await withGracefulShutdownHandler {
                try await cancelWhenGracefulShutdown {
                    try await work { states.set(name, .running) }
                }
            } onGracefulShutdown: {
                states.set(name, .stopping)
            }
        } catch is CancellationError {
            // Stopped while waiting: a clean end.
        } catch {
            states.set(name, .failed, detail: "\(error)")
            throw error
        }
        states.set(name, .stopped)
    }
}

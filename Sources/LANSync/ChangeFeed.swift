import Foundation
public import LANSyncCore
import Synchronization

/// A change to a replica, as observers see it.
public enum ReplicaChange: Sendable, Equatable {
    /// Entries new to this replica: appended here (`local`) or merged from a peer or an import.
    case entries([Entry], local: Bool)
    /// Preferences whose winning write changed (a nil value is an unset).
    case preferences([PreferenceWrite], local: Bool)
    /// Rows of app tables changed: written here (`tables` then empty) or merged (the tables, lowercase).
    case rows(tables: Set<String>, local: Bool)
}

extension ReplicaChange {
    /// Whether it was made on this replica (rather than merged from a peer or an import).
    package var isLocal: Bool {
        switch self {
        case .entries(_, let local), .preferences(_, let local), .rows(_, let local): local
        }
    }
}

/// Hands every committed change to each current observer, in commit order.
final class ChangeFeed: Sendable {
    private let observers = Mutex<[UUID: AsyncStream<ReplicaChange>.Continuation]>([:])

    func stream() -> AsyncStream<ReplicaChange> {
        // Unbounded: an observer must not be able to slow down or block writers; it reads at its pace.
        let (stream, continuation) = AsyncStream<ReplicaChange>.makeStream()
        let id = UUID()
        observers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ change: ReplicaChange) {
        let current = observers.withLock { Array($0.values) }
        for continuation in current { continuation.yield(change) }
    }

    func finish() {
        let current = observers.withLock { observers in
            defer { observers.removeAll() }
            return Array(observers.values)
        }
        for continuation in current { continuation.finish() }
    }
}

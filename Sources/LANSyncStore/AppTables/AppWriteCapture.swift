import LANSyncCore
import Synchronization

/// The SQL functions that LANSync's triggers on app tables call, registered only on LANSync's
/// own connections. A program that opens the replica file some other way and writes an app
/// table fails with "no such function: lansync_capture" instead of writing a row no peer will
/// ever hear of; so does a write on LANSync's connection outside `ReplicaStore.write`.
///
/// - `lansync_capture(table, operation, …)`: records what a statement did to one row, for the
///   write transaction to turn into changes when the app's code returns (see
///   `WriteContext.captureLocalWrites`). Ignored while LANSync itself writes merged rows.
/// - `lansync_local()`: 1 during an app's write, 0 while LANSync writes merged rows; guards the
///   triggers that only local writes fire (cascades, the append-only refusal).
final class AppWriteCapture: Sendable {
    enum Mode: Sendable { case idle, local, merging }

    /// What one statement did to one row: the trigger's operation and arguments.
    struct Event: Sendable {
        enum Operation: Int64, Sendable { case insert = 1, update = 2, delete = 3 }
        let table: Int64
        let operation: Operation
        /// Everything after the table and the operation, as the trigger passed it (see `AppTriggers`).
        let arguments: [SQLValue]
    }

    private let state = Mutex<(mode: Mode, events: [Event])>((.idle, []))

    var mode: Mode { state.withLock { $0.mode } }

    /// Records one trigger call; returns why it is refused (outside a write, malformed), or nil.
    func record(table: Int64, operation code: Int64, _ arguments: [SQLValue]) -> String? {
        state.withLock { state in
            switch state.mode {
            case .merging: return nil
            case .idle: return Self.outsideWrite
            case .local:
                guard let operation = Event.Operation(rawValue: code) else {
                    return "lansync_capture: malformed call; apply the schema again"
                }
                state.events.append(Event(table: table, operation: operation, arguments: arguments))
                return nil
            }
        }
    }

    static let outsideWrite =
        "app tables are written through LANSync only (node.write, `lansync exec`, or the local API), so that every write syncs"

    /// Runs `body` in `mode`, restoring the mode before (a local write can run inside a merge
    /// transaction that took it along).
    func with<T>(_ mode: Mode, _ body: () throws -> T) rethrows -> T {
        let previous = state.withLock { state in
            let previous = state.mode
            state.mode = mode
            return previous
        }
        defer { state.withLock { $0.mode = previous } }
        return try body()
    }

    /// Takes the recorded events, leaving none.
    func takeEvents() -> [Event] {
        state.withLock { state in
            let events = state.events
            state.events.removeAll()
            return events
        }
    }
}

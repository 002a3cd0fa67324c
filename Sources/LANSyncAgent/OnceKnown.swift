import Synchronization

/// A value that becomes known once, such as the port a listener bound (or why it never will be),
/// awaited by any number of tasks. Each wait ends when the value is settled, or when the waiting
/// task is cancelled: a task that announces the port can then be a child of the scope that runs
/// the listener, and end with it, instead of waiting forever for a port that never comes.
package final class OnceKnown<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [Int: CheckedContinuation<Value, any Error>] = [:]
        var nextTicket = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// The value, if it is settled and was not a failure.
    package var value: Value? { state.withLock { try? $0.result?.get() } }

    /// How many tasks wait for the value now.
    package var waiting: Int { state.withLock { $0.waiters.count } }

    /// Settles the value and ends every wait with it. Only the first call counts: a listener
    /// that bound and later stopped keeps the port it had.
    package func settle(_ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// Waits until the value is settled and returns it (or throws its failure); throws
    /// `CancellationError` as soon as the waiting task is cancelled.
    package func wait() async throws -> Value {
        let ticket = state.withLock { state in
            defer { state.nextTicket += 1 }
            return state.nextTicket
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Under the lock, so that a cancellation either finds the waiter here or was
                // already seen by `Task.isCancelled`: a wait is never left behind.
                let known = state.withLock { state -> Result<Value, any Error>? in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[ticket] = continuation
                    return nil
                }
                if let known { continuation.resume(with: known) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: ticket) }?.resume(throwing: CancellationError())
        }
    }
}

import NIOCore

/// Serves the connections `server` accepts with `handle` until cancelled, dropping none of them.
///
/// NIO traps when an accepted connection's `NIOAsyncChannel` is released unfinished, and a plain
/// `for try await` over the server's connections, cancelled, drops those accepted after the last
/// one it took: a peer that connected just as the agent stopped crashed it (the container test's
/// clean-stop check caught this under load). Instead, cancelling closes the listening socket, the
/// connections already accepted are taken and handed to `handle` as usual, and then cancelled.
func serveUntilCancelled<Child: Sendable>(
    _ server: NIOAsyncChannel<Child, Never>, handle: @escaping @Sendable (Child) async -> Void
) async throws {
    let loop = Task {
        try await server.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { children in
                for try await child in inbound { children.addTask { await handle(child) } }
                // The listening socket is closed: we are stopping. End what it accepted.
                children.cancelAll()
            }
        }
    }
    try await withTaskCancellationHandler {
        try await loop.value
    } onCancel: {
        server.channel.close(promise: nil)
    }
}

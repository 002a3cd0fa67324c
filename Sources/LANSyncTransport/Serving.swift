package import NIOCore

/// Serves the connections `server` accepts with `handle` until cancelled, dropping none of them.
///
/// NIO traps when an accepted connection's `NIOAsyncChannel` is released unfinished, and a plain
/// `for try await` over the server's connections, cancelled, drops those accepted after the last
/// one it took: a peer that connected just as the agent stopped crashed it (the container test's
/// clean-stop check caught this under load). Instead, cancelling closes the listening socket, the
/// connections already accepted are taken and handed to `handle` as usual, and then cancelled.
/// One window stays open inside NIO (a connection accepted as the socket closed is activated after
/// the stream ended and never reaches us); `NIOAsyncChannel.wrapping` makes that one harmless.
package func serveUntilCancelled<Child: Sendable>(
    _ server: NIOAsyncChannel<Child, Never>,
    handle: @escaping @Sendable (Child) async -> Void
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

extension NIOAsyncChannel where Inbound: Sendable, Outbound: Sendable {
    /// Wraps `channel` as `init(wrappingChannelSynchronously:)` does, and finishes its writer when
    /// the channel closes; every channel the agent serves or dials is wrapped this way.
    ///
    /// A listener that stops can accept a connection that nobody will take: NIO activates it after
    /// the stream of accepted connections has ended, drops it, and traps because its writer was
    /// released unfinished (apple/swift-nio#2813, open). An agent stopped with SIGTERM while its
    /// peers redialed it died this way (exit 132). Holding the wrapper until the channel closes
    /// means it is never released unfinished: a connection that is served closes when its session
    /// ends, and one that nobody took closes when its peer gives up or the process exits.
    package static func wrapping(_ channel: any Channel) throws -> NIOAsyncChannel {
        let wrapped = try Self(wrappingChannelSynchronously: channel)
        // executeThenClose finishes the writer (and, on a closed channel, does nothing else); a
        // second call after the session's own is harmless.
        channel.closeFuture.whenComplete { _ in Task { try? await wrapped.executeThenClose { _, _ in } } }
        return wrapped
    }
}

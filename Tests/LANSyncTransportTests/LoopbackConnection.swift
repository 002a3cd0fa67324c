import NIOCore
import NIOPosix
import Testing

@testable import LANSyncTransport

/// Two ends of one framed TCP connection on loopback, as the agent's listener and dialer make them.
enum LoopbackConnection {
    /// Connects a client to a fresh listener and runs `body` with the client's end and the
    /// accepted end; the listener closes afterwards.
    static func run<T: Sendable>(
        _ body: (_ client: FramedChannel, _ server: FramedChannel) async throws -> T
    ) async throws -> T {
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
            }
        let port = try #require(listener.channel.localAddress?.port)
        let client = try await ClientBootstrap(group: group)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
            }
        return try await listener.executeThenClose { connections in
            var accepted = connections.makeAsyncIterator()
            let server = try #require(try await accepted.next())
            return try await body(client, server)
        }
    }
}

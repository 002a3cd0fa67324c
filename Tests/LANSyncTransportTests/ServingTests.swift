import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import LANSyncTransport

/// A listener that stops while peers are connecting must not crash the process. NIO hands each
/// accepted connection to the serving loop through a stream; a connection accepted just before the
/// listening socket closed can be activated after that stream ended, and NIO traps when such a
/// connection's writer is released unfinished (apple/swift-nio#2813). An agent stopping with
/// SIGTERM while its peers redialed it died this way in the container test (exit 132).
@Suite struct ServingTests {
    /// Bursts of connections, each followed at once by stopping the listener: the process survives
    /// (the trap would end the whole test run) and every connection is closed or served, never
    /// left half-open by the listener. Before the fix, about one round in ten trapped here.
    @Test func aListenerStoppedWhilePeersConnectDoesNotTrap() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        for _ in 0..<30 {
            let server = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: "127.0.0.1", port: 0) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>.wrapping(channel)
                    }
                }
            let port = try #require(server.channel.localAddress?.port)
            let serving = Task {
                try await serveUntilCancelled(server) { child in
                    try? await child.executeThenClose { _, _ in }
                }
            }
            // A burst of clients; the listener stops while they are still being accepted.
            let clients = (0..<24).map { _ in
                ClientBootstrap(group: group).connect(host: "127.0.0.1", port: port)
            }
            try await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))
            serving.cancel()
            try? await serving.value
            for client in clients {
                if let channel = try? await client.get() { try? await channel.close() }
            }
            #expect(server.channel.isActive == false)
        }
        try await group.shutdownGracefully()
    }
}

import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// How much of this machine the local API lets its clients hold (documented in docs/openapi.json).
package enum APILimits {
    /// Open connections served; past it each new one is answered 503 with Retry-After and closed.
    package static let connections = 256
    /// Connections accepted at all; past it the listener waits (the kernel's backlog holds them).
    static let acceptedConnections = 2 * connections
    /// Change feeds open at once; past it a feed is answered 503 with Retry-After.
    package static let feeds = 64
    /// A request head must be complete within this, and a keep-alive connection with no request
    /// under way is closed after it: half-sent requests must not hold connections forever.
    package static let idleSeconds: Int64 = 10
    /// What a refused client is told to wait, in seconds.
    package static let retryAfterSeconds = 1
}

/// The local API's open connections, counted across its servers.
final class OpenConnections: Sendable {
    private let count = Atomic<Int>(0)

    /// Counts one more; returns whether it is within the bound.
    func open() -> Bool { count.wrappingAdd(1, ordering: .relaxed).newValue <= APILimits.connections }
    func close() { count.wrappingSubtract(1, ordering: .relaxed) }
}

/// Put after a connection's HTTP decoding: counts it, and answers each request of a connection
/// past the bound with 503 and Retry-After, then closes it.
final class ConnectionBoundHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let connections: OpenConnections
    private var counted = false
    private var refused = false

    init(_ connections: OpenConnections) { self.connections = connections }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { count() }
    }

    func channelActive(context: ChannelHandlerContext) {
        count()
        context.fireChannelActive()
    }

    private func count() {
        guard !counted else { return }
        counted = true
        refused = !connections.open()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if counted { connections.close() }
        counted = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refused else { return context.fireChannelRead(data) }
        guard case .head = unwrapInboundIn(data) else { return }
        let error = APIError(
            .serviceUnavailable,
            "too_many_connections",
            "the local API serves \(APILimits.connections) connections at once; retry in \(APILimits.retryAfterSeconds) s, or reuse a connection"
        )
        let body = ByteBuffer(string: error.json + "\n")
        var head = HTTPResponse(status: .serviceUnavailable)
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.retryAfter] = "\(APILimits.retryAfterSeconds)"
        head.headerFields[.connection] = "close"
        head.headerFields[.contentLength] = "\(body.readableBytes)"
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }
}

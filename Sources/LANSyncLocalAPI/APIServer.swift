import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// One HTTP/1.1 server of the local API, built from Hummingbird's server parts rather than its
/// `Application`: an `Application` runs a timer that refreshes its `Date` header every second,
/// and with one server on TCP and one on the Unix socket that was most of an idle agent's
/// wakeups. The header is made here when a response needs it (`HTTPDate`), at most once a second.
enum APIServer {
    /// A server for `responder` at `address`; `onRunning` is told the listening channel.
    static func make(
        _ responder: some HTTPResponder<BasicRequestContext>,
        at address: BindAddress,
        handlers: @escaping @Sendable () -> [any RemovableChannelHandler],
        idleTimeout: TimeAmount,
        maximumConnections: Int,
        logger: Logger,
        onRunning: @escaping @Sendable (any Channel) async -> Void
    ) throws -> any Service {
        let builder = HTTPServerBuilder.http1(
            configuration: .init(additionalChannelHandlers: handlers(), idleTimeout: idleTimeout)
        )
        let configuration = ServerConfiguration(
            address: address,
            serverName: nil,
            availableConnectionsDelegate: MaximumAvailableConnections(maximumConnections)
        )
        return try builder.buildServer(
            configuration: configuration,
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: logger,
            responder: { request, writer, channel in
                let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
                var response: Response
                do {
                    response = try await responder.respond(to: request, context: context)
                } catch let error as HTTPParserError {
                    throw error
                } catch {
                    logger.debug("local API: unhandled error", metadata: ["error": "\(error)"])
                    response = Response(status: .internalServerError)
                }
                response.headers[.date] = HTTPDate.now()
                do {
                    try await writer.write(response: response.head, body: response.body)
                } catch is HTTPParserError {
                    // The request could not be read while the response went out: close the
                    // connection rather than answer twice.
                    throw ResponseAbandoned()
                }
            },
            onServerRunning: onRunning
        )
    }

    /// Ends a connection whose request turned out unreadable while its response was written.
    struct ResponseAbandoned: Error {}
}

/// The `Date` header's text (RFC 9110 §5.6.7, "Sun, 06 Nov 1994 08:49:37 GMT"), formatted at
/// most once a second and only when a response asks for it: no timer runs while nothing is asked.
enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    static func now() -> String {
        let second = time(nil)
        return cache.withLock { cached in
            if cached.second != second {
                cached = (second, format(second))
            }
            return cached.text
        }
    }

    /// `seconds` since 1970 as an IMF-fixdate; the C locale's day and month names are the ones
    /// the format requires.
    static func format(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 40)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

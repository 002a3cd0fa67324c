import Foundation
import LANSync
import LANSyncAgent
import LANSyncLocalAPI
import Logging
import ServiceLifecycle

/// An app that syncs from inside its own process: it opens its replica, starts sync beside its
/// own work (no `lansync run`, no polling), logs three taps, and stops once a peer holds them.
///
///     lansync-example-taps DATA_DIR [HOST:PORT]
///
/// DATA_DIR is a node already initialised and in a group (`lansync init`, `lansync group join`);
/// HOST:PORT is a peer to dial (without one, peers are found over mDNS).
@main
struct TapLogger {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2 else {
            FileHandle.standardError.write(Data("usage: lansync-example-taps DATA_DIR [HOST:PORT]\n".utf8))
            exit(2)
        }
        let node = try LANSyncNode.open(at: DataDirectory(path: arguments[1]))

        // The same configuration `lansync run` takes (defaults: port 7741, mDNS on).
        var configuration = AgentConfiguration()
        configuration.listenPort = 0
        if arguments.count > 2, let peer = PeerAddress(arguments[2]) { configuration.staticPeers = [peer] }
        let logger = Logger(label: "tap-logger")
        let sync = try Agent(node: node, configuration: configuration, logger: logger)
        // The local HTTP API and dashboard too, for the app's other parts and its caregivers
        // (`lansync dashboard` prints a link); port 0 picks a free one (the default is 7742).
        var apiConfiguration = LocalAPIConfiguration()
        apiConfiguration.port = 0
        let api = await LocalAPI(agent: sync, configuration: apiConfiguration, logger: logger)
        let services = ServiceGroup(
            services: [sync, api],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )

        // Two tasks: sync, and the app's own work. The work stops sync when it is done; a signal
        // (SIGTERM, ^C) stops sync first, and then the work is cancelled, so the program ends either way.
        try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                try await services.run()
                return true
            }
            tasks.addTask {
                // Each append is durable when it returns, and the running sync pushes it to
                // connected peers at once.
                for symbol in ["more", "juice", "help"] {
                    let entry = try await node.append(to: "symbol_taps", payload: #"{"symbol":"\#(symbol)"}"#)
                    print("logged \(symbol) as \(entry.id)")
                }
                // Wait until a connected peer announces our digest, then stop syncing.
                while true {
                    let report = await sync.report()
                    if report.connectedDigests.values.contains(report.digest) { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                print("a peer holds every tap; stopping")
                await services.triggerGracefulShutdown()
                return false
            }
            // Sync ending first means a signal stopped it: stop the work too.
            if try await tasks.next() == true { tasks.cancelAll() }
        }
    }
}

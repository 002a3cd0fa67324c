import ArgumentParser
import Foundation
import LANSync

/// The `lansync` command: subcommands as nested types, shared options in `GlobalOptions`.
@main
struct Lansync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lansync",
        abstract: "Keep logs and preferences in sync between the machines of a group, with no server.",
        discussion: """
            Each machine keeps its own replica (SQLite) of every stream and preference. Writes are local,
            durable and instant, even offline.

            Get started:
              lansync init --name home-desktop
              lansync log append symbol_taps '{"symbol":"more","grid":[2,3]}'
              lansync log list symbol_taps
              lansync pref set controls/slider/sensitivity 0.7
              lansync status

            The data directory is --data-dir, else $LANSYNC_DATA_DIR, else $XDG_DATA_HOME/lansync,
            else ~/.local/share/lansync.
            """,
        version: "0.1.0",
        subcommands: [
            Init.self, ID.self, Log.self, Pref.self, Status.self, Export.self, Import.self,
        ]
    )
}

/// Options every command accepts.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help: ArgumentHelp(
            "The node's data directory.",
            discussion: "Default: $LANSYNC_DATA_DIR, else $XDG_DATA_HOME/lansync, else ~/.local/share/lansync.",
            valueName: "dir"))
    var dataDir: String?

    var dataDirectory: DataDirectory {
        DataDirectory.resolve(explicit: dataDir, environment: ProcessInfo.processInfo.environment)
    }

    /// Opens the initialised node, or fails with a message that says to run `init`.
    func openNode() throws -> LANSyncNode {
        try LANSyncNode.open(
            at: dataDirectory, clock: NodeClock.fromEnvironment(ProcessInfo.processInfo.environment))
    }
}

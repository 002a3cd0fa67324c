import ArgumentParser
import Foundation
import LANSync

/// The `lansync` command: subcommands as nested types, shared options in `GlobalOptions`.
@main
struct Lansync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lansync",
        abstract: "Keep logs, preferences and SQL tables in sync between the machines of a group, with no server.",
        discussion: """
            Each machine keeps its own replica (SQLite) of every stream and preference. Writes are local, durable and instant, even offline.

            Get started:
              lansync init --name home-desktop
              lansync log append symbol_taps '{"symbol":"more","grid":[2,3]}'
              lansync log list symbol_taps
              lansync pref set controls/slider/sensitivity 0.7
              lansync schema apply app.sql && lansync exec "INSERT INTO athletes (id, name) VALUES ('a1', 'Ana')"
              lansync query "SELECT * FROM athletes"
              lansync status

            Every command takes --data-dir DIR (before or after the command's name); without it the data directory is $LANSYNC_DATA_DIR, else data-dir in the config file, else $XDG_DATA_HOME/lansync, else ~/.local/share/lansync. Each command's --help has examples.

            --config FILE names a configuration file (default: $LANSYNC_CONFIG, else ~/.config/lansync/lansync.conf, else /etc/lansync/lansync.conf, when present). Flags override it.

            Concepts: lansync help groups | streams | preferences | tables | reinstall | discovery | config
            """,
        version: "0.1.0",
        subcommands: [
            Init.self, ID.self, Group.self, Groups.self, Run.self, Peers.self, Sync.self, Log.self, Pref.self,
            Status.self,
            Export.self,
            Import.self, Watch.self, Why.self, Report.self, SchemaCommand.self, Exec.self, Query.self, Dashboard.self,
            Doctor.self,
        ]
    )

    /// Parses with global options hoisted (see `GlobalOptions.hoisted`), then runs the command.
    static func main() async {
        let arguments: [String]
        do {
            try StrictUTF8.checkCommandLine()
            arguments = try LoadedConfig.load(
                arguments: Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment
            )
        } catch {
            note("lansync: error: \(error)")
            Foundation.exit(1)
        }
        if let topic = HelpTopic.requested(by: arguments) {
            Output().line(topic.text)
            return
        }
        do {
            var command = try parseAsRoot(GlobalOptions.hoisted(arguments))
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every command accepts.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help: ArgumentHelp(
            "The node's data directory.",
            discussion: "Default: $LANSYNC_DATA_DIR, else $XDG_DATA_HOME/lansync, else ~/.local/share/lansync.",
            valueName: "dir"
        )
    )
    var dataDir: String?
    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "A configuration file (key = value lines; see `lansync help config`).",
            discussion:
                "Default: $LANSYNC_CONFIG, else ~/.config/lansync/lansync.conf, else /etc/lansync/lansync.conf.",
            valueName: "file"
        )
    )
    var config: String?
    @Option(
        name: .customLong("group"),
        help: ArgumentHelp(
            "The group to work on, by its name or tag, when the node is in several (`lansync groups` lists them).",
            valueName: "name"
        )
    )
    var group: String?

    /// Lets `lansync --data-dir DIR log list` work like `lansync log list --data-dir DIR` (and the
    /// same for --group): each command declares the option itself, so an occurrence before the
    /// command's name is moved to the end (or just before a `--`, after which everything is positional).
    static func hoisted(_ arguments: [String]) -> [String] {
        var leading = [String]()
        var rest = arguments
        while let first = rest.first, first.hasPrefix("--data-dir") || first.hasPrefix("--group") {
            rest.removeFirst()
            leading.append(first)
            if first == "--data-dir" || first == "--group", let value = rest.first {
                leading.append(value)
                rest.removeFirst()
            }
        }
        guard !leading.isEmpty else { return arguments }
        if let terminator = rest.firstIndex(of: "--") {
            rest.insert(contentsOf: leading, at: terminator)
        } else {
            rest += leading
        }
        return rest
    }

    /// The node's data directory (its identity, and its first group).
    var nodeDirectory: DataDirectory {
        let environment = ProcessInfo.processInfo.environment
        let fromEnvironment = environment["LANSYNC_DATA_DIR"].map { !$0.isEmpty } ?? false
        return DataDirectory.resolve(
            explicit: dataDir ?? (fromEnvironment ? nil : LoadedConfig.file.dataDir),
            environment: environment
        )
    }

    /// The data directory of the group the command works on (`--group`, or the node's only one);
    /// refuses when the node is in several groups and none is named.
    func selectedDirectory() throws(LANSyncError) -> DataDirectory {
        try NodeGroups.select(group, in: nodeDirectory)
    }

    /// The selected group's data directory, once `openNode()` has found it (the node's own
    /// directory when selecting failed, which `openNode()` has reported by then).
    var dataDirectory: DataDirectory { (try? selectedDirectory()) ?? nodeDirectory }

    /// Opens the initialised node (the selected group's replica), or fails with a message that says
    /// to run `init`.
    func openNode() throws -> LANSyncNode { try openNode(at: try selectedDirectory()) }

    /// Opens the node's replica in `directory` (one of its groups' directories).
    func openNode(at directory: DataDirectory) throws -> LANSyncNode {
        let node = try LANSyncNode.open(
            at: directory,
            clock: NodeClock.fromEnvironment(ProcessInfo.processInfo.environment)
        )
        if let readOnly = node.store.readOnlyNote { note("lansync: warning: \(readOnly)") }
        return node
    }
}

import ArgumentParser
import Foundation
import LANSync

struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, join and show the group of devices this node syncs with.",
        discussion: """
            A group is the devices that share one secret. Only members can read or write the group's data: the secret is checked in every connection's handshake, and a device outside the group learns nothing.

            Start a group on one device, then join it from the others with the code it prints:
              lansync group create
              lansync group join 1f4k3mq-9x2vb7c-...    (on each other device)
            """,
        subcommands: [Create.self, Join.self, Show.self, Leave.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a new group and print its join code.",
            discussion: """
                The join code carries the group's secret: give it only to devices of the group (read it aloud, type it, or copy it over a channel you trust).

                Example:
                  lansync group create
                """)
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let group = try await reportingErrors { try global.openNode().createGroup() }
            let out = Output()
            out.line("created group \(group.tag)")
            out.line("join code: \(group.joinCode)")
            out.line("on each other device: lansync group join \(group.joinCode)")
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Join the group a join code names.",
            discussion: """
                Dashes and case do not matter, and O, I and L are read as 0, 1 and 1. A mistyped code is refused.

                Example:
                  lansync group join 1f4k3mq-9x2vb7c-...
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The join code printed by `lansync group create` or `lansync group show --code`.")
        var code: String
        @Flag(help: "Leave the current group for this one.") var replace = false

        func run() async throws {
            let (node, changed) = try await reportingErrors {
                let node = try global.openNode()
                return (node, try node.joinGroup(code: code, replacing: replace))
            }
            let tag = try await reportingErrors { try node.group()?.tag ?? "" }
            Output().line(changed ? "joined group \(tag)" : "already in group \(tag); nothing changed")
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the group's public tag (exit 1 when in no group).",
            discussion: """
                The tag is a keyed hash of the secret: safe to show, and what devices advertise to find each other. --code prints the join code, to add another device.

                --json prints one object: tag, data_dir.

                Examples:
                  lansync group show
                  lansync group show --code
                """)
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print one JSON object.") var json = false
        @Flag(help: "Print the join code (it carries the secret).") var code = false

        func run() async throws {
            let (node, group) = try await reportingErrors {
                let node = try global.openNode()
                return (node, try node.group())
            }
            guard let group else {
                note("lansync: this device is in no group; start one with `lansync group create` or join one with `lansync group join CODE`")
                throw ExitCode(1)
            }
            let out = Output()
            if code {
                out.line(group.joinCode)
            } else if json {
                out.line([("tag", ExportFile.quoted(group.tag)), ("data_dir", ExportFile.quoted(node.dataDirectory.path))].jsonObject)
            } else {
                out.line("group \(group.tag)")
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Leave the group: keep the data, sync with nobody until joining again.",
            discussion: """
                Example:
                  lansync group leave
                """)
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await reportingErrors { try global.openNode().leaveGroup() }
            Output().line("left the group; this device syncs with nobody until `lansync group join CODE`")
        }
    }
}

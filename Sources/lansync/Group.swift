import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, join and show the group of devices this node syncs with.",
        discussion: """
            A group is the devices that share one secret. Only members can read or write the group's data: the secret is checked in every connection's handshake, and a device outside the group learns nothing.

            Start a group on one device, then join it from the others with the code it prints:
              lansync group create
              lansync group join 1f4k3mq-9x2vb7c-...    (on each other device)

            Or, on the same network, with a short code a member shows (its agent running):
              lansync group invite                      (on a member: prints e.g. 4821-3907)
              lansync group join 4821-3907              (on the new device)
            """,
        subcommands: [Create.self, Join.self, Invite.self, Show.self, Leave.self])

    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a new device on this network join with a short code (the agent must be running).",
            discussion: """
                Prints an 8-digit code and keeps a pairing window open for --minutes (default 5). On the new device, `lansync group join CODE` finds this one over mDNS and runs CPace, a password-authenticated key exchange keyed by the code: a device that does not know the code gets one guess per attempt, and the window closes after 3 attempts, when its time is up, or once a device joined. Both devices then show the other's name and device ID; the group secret moves only after both proved they hold the code.

                Waits until a device joined or the window closed (--no-wait returns at once).

                Example:
                  lansync group invite --minutes 10
                """)
        @OptionGroup var global: GlobalOptions
        @Option(help: "How long the window stays open (1-60 minutes).") var minutes = 5
        @Flag(help: "Print the code and return; do not wait for the outcome.") var noWait = false

        func validate() throws {
            guard (1...60).contains(minutes) else { throw ValidationError("--minutes must be 1 to 60") }
        }

        func run() async throws {
            let node = try await reportingErrors { try global.openNode() }
            guard try await reportingErrors({ try node.group() }) != nil else {
                note("lansync: error: this device is in no group; create one (`lansync group create`) or join one first")
                throw ExitCode(1)
            }
            guard let answer = await ControlClient.invite(node.dataDirectory, minutes: minutes) else {
                note("lansync: error: no agent is running for \(node.dataDirectory.path); start it with `lansync run` (it answers the new device)")
                throw ExitCode(1)
            }
            guard let code = answer["code"] else {
                note("lansync: error: \(answer["error"] ?? "the agent could not open a pairing window")")
                throw ExitCode(1)
            }
            let out = Output()
            out.line("pairing code: \(code)   (open for \(minutes) minute\(minutes == 1 ? "" : "s"), \(PairingWindowText.attempts) attempts)")
            out.line("on the new device, on this network: lansync group join \(code)")
            out.line("(where mDNS does not reach: lansync group join \(code) --from THIS-HOST:\(answer["port"] ?? "?"))")
            out.flush()
            guard !noWait else { return }
            while true {
                try await Task.sleep(for: .milliseconds(300))
                guard let status = await ControlClient.inviteStatus(node.dataDirectory) else {
                    note("lansync: error: the agent stopped; the pairing window is closed")
                    throw ExitCode(1)
                }
                switch status["state"] {
                case "joined":
                    out.line("joined: \(status["name"] ?? "?") (\(status["device_id"] ?? "?"))")
                    return
                case "closed", "none":
                    let failures = status["failures"].map { $0.isEmpty ? "" : " (\($0))" } ?? ""
                    note("lansync: the pairing window closed: \(status["reason"] ?? "closed")\(failures)")
                    throw ExitCode(1)
                default:
                    continue
                }
            }
        }
    }

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
            abstract: "Join a group: with its join code, or with a short code a member on this network shows.",
            discussion: """
                A join code (from `lansync group create` or `group show --code`): dashes and case do not matter, and O, I and L are read as 0, 1 and 1; a mistyped code is refused.

                A short code (8 digits, from `lansync group invite` on a member whose agent runs): this device finds the member over mDNS (or at --from HOST:PORT), proves it knows the code with CPace, and receives the group's secret. A wrong code is reported on both devices and costs one of the window's 3 attempts.

                Examples:
                  lansync group join 1f4k3mq-9x2vb7c-...
                  lansync group join 4821-3907
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A join code, or a short code from `lansync group invite`.")
        var code: String
        @Flag(help: "Leave the current group for this one.") var replace = false
        @Option(help: "With a short code: the inviting device's pairing address (HOST:PORT), instead of looking for it over mDNS.")
        var from: String?
        @Option(help: "With a short code: how long to look for the inviting device over mDNS (seconds).") var timeout: Double = 10

        func run() async throws {
            var code = code
            if PairingCodeText.isShortCode(code) {
                let node = try await reportingErrors { try global.openNode() }
                if !replace, try await reportingErrors({ try node.group() }) != nil {
                    note("lansync: error: this device is in a group already; add --replace to leave it for the new one")
                    throw ExitCode(1)
                }
                let joined = try await reportingErrors {
                    try await PairingClient.join(
                        code: code, device: node.deviceID, name: node.identity.name, address: from, timeout: timeout)
                }
                Output().line("paired with \(joined.inviterName) (\(joined.inviterDevice))")
                code = joined.joinCode
            }
            let joinCode = code
            let (node, changed) = try await reportingErrors {
                let node = try global.openNode()
                return (node, try node.joinGroup(code: joinCode, replacing: replace))
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

/// What the CLI says about short codes without depending on the pairing machinery's types.
enum PairingCodeText {
    static func isShortCode(_ text: String) -> Bool {
        let kept = text.filter { $0 != "-" && !$0.isWhitespace }
        return kept.count == 8 && kept.allSatisfy { $0.isASCII && $0.isNumber }
    }
}

enum PairingWindowText {
    static let attempts = 3
}

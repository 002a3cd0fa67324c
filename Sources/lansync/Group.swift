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

            See who is in the group, and remove a lost or given-away device:
              lansync group members
              lansync group remove 5GQ2M7K-...          (a new group key for everyone else)
            """,
        subcommands: [Create.self, Join.self, Invite.self, Members.self, Remove.self, Show.self, Leave.self]
    )

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "List the group's member devices: name, device ID, key fingerprint, who added them and when, last seen.",
            discussion: """
                The group pins each member's device key when it first sees it: a device that comes back with another key (reinstalled, or a cloned machine) is refused until a member vouches for it with `lansync group invite`. Removed devices are listed with who removed them; they are refused whatever key they present.

                The list is synced between members like other data, so it shows devices this one never met. LAST SEEN is when this device last had a connection to it.

                --json prints one object per member, one per line: device_id, name, key_fingerprint, added_by, added_at, via, removed_by, removed_at, removed_in_epoch, last_seen (ISO 8601 or null), this_device.

                Example:
                  lansync group members
                """
        )
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print one JSON object per member.") var json = false

        func run() async throws {
            let node = try await reportingErrors { try global.openNode() }
            let (epochs, members) = try await reportingErrors { (try node.groupEpochs(), try node.members()) }
            guard let epochs else {
                note(
                    "lansync: this device is in no group; start one with `lansync group create` or join one with `lansync group join CODE`"
                )
                throw ExitCode(1)
            }
            let peers =
                await ControlClient.report(node.dataDirectory)?.peers ?? ControlClient.savedPeers(node.dataDirectory)
            let seen = Dictionary(
                peers.compactMap { peer in peer.deviceID.map { ($0, peer) } },
                uniquingKeysWith: { first, _ in first }
            )
            let names = Dictionary(members.map { ($0.deviceID, $0.name) }, uniquingKeysWith: { first, _ in first })
            let me = node.deviceID.description
            func lastSeen(_ member: GroupMember) -> Int64? {
                member.deviceID == me
                    ? nil
                    : (seen[member.deviceID]?.state == .connected
                        ? Int64(Timestamps.nowMilliseconds()) : seen[member.deviceID]?.lastSeen)
            }
            let out = Output()
            if json {
                for member in members {
                    func text(_ value: String?) -> String { value.map(ExportFile.quoted) ?? "null" }
                    out.line(
                        [
                            ("device_id", text(member.deviceID)), ("name", text(member.name)),
                            ("key_fingerprint", text(member.key.map(GroupMember.fingerprint))),
                            ("added_by", text(member.addedBy)),
                            ("added_at", text(member.addedAt)), ("via", text(member.via)),
                            ("removed_by", text(member.removedBy)),
                            ("removed_at", text(member.removedAt)),
                            ("removed_in_epoch", member.removedInEpoch.map(String.init) ?? "null"),
                            ("left_at", text(member.leftAt)),
                            ("last_seen", text(lastSeen(member).map(Timestamps.iso8601))),
                            ("this_device", member.deviceID == me ? "true" : "false"),
                        ].jsonObject
                    )
                }
                return
            }
            guard !members.isEmpty else {
                out.line("no member records yet: they are written when the agent runs (`lansync run`)")
                return
            }
            let now = Int64(Timestamps.nowMilliseconds())
            var rows = [["NAME", "DEVICE", "KEY", "ADDED BY", "ADDED", "LAST SEEN", "NOTE"]]
            for member in members {
                var notes = [String]()
                if member.deviceID == me { notes.append("this device") }
                if member.key == nil { notes.append("vouched for; key pinned when it first connects") }
                if let leftAt = member.leftAt { notes.append("LEFT the group at \(leftAt)") }
                if member.isRemoved {
                    notes.append(
                        "REMOVED by \(member.removedBy.flatMap { names[$0] } ?? member.removedBy ?? "?") at \(member.removedAt ?? "?")"
                    )
                }
                rows.append([
                    member.name, String(member.deviceID.prefix(15)), member.key.map(GroupMember.fingerprint) ?? "-",
                    member.addedBy.flatMap { names[$0] } ?? (member.via == "created the group" ? "(created it)" : "-"),
                    member.addedAt.map { String($0.prefix(10)) } ?? "-",
                    member.deviceID == me ? "-" : lastSeen(member).map { ago(now - $0) } ?? "never",
                    ([member.via] + notes).joined(separator: "; "),
                ])
            }
            for line in aligned(rows) { out.line(line) }
            out.line(
                "group \(epochs.current.tag), epoch \(epochs.epoch); \(members.filter(\.isPresent).count) members"
            )
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a lost or given-away device from the group: a new group key for everyone else.",
            discussion: """
                Records the removal, starts a new epoch with a fresh secret, seals that secret to each remaining member's pinned key, and switches this device to it (a running agent picks it up at once). Members online get it over their connection; members that are away get it from any member they meet later. From then on every member that knows the new epoch refuses the removed device, also after it is reinstalled with a new key, and it learns nothing those members write (a member that has not heard of the removal yet still syncs with it until it does).

                A member whose key the group never pinned (it never connected to anyone since member records exist) cannot open the new key: the command names them; add them again with `lansync group invite`.

                DEVICE is a member's name, or its device ID from `lansync group members` (its first 7 characters are enough when unambiguous; at least 4).

                Example:
                  lansync group remove old-tablet
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The device to remove: its device ID (or a unique prefix) or its name.") var device: String

        func run() async throws {
            let node = try await reportingErrors { try global.openNode() }
            let members = try await reportingErrors { try node.members() }
            // A member's name first; else its device ID, or a prefix of it of at least 4 characters.
            let present = members.filter { !$0.isRemoved }
            let wanted = device.uppercased().replacingOccurrences(of: "-", with: "")
            var matches = present.filter { $0.name == device }
            if matches.isEmpty, wanted.count >= 4 {
                matches = present.filter { $0.deviceID.replacingOccurrences(of: "-", with: "").hasPrefix(wanted) }
            }
            guard matches.count == 1, let target = DeviceID(matches[0].deviceID) else {
                note(
                    matches.isEmpty
                        ? "lansync: error: no member matches '\(device)'; `lansync group members` lists them"
                        : "lansync: error: '\(device)' matches \(matches.count) members (\(matches.map(\.name).joined(separator: ", "))); give more of the device ID"
                )
                throw ExitCode(1)
            }
            let removal = try await reportingErrors { try await node.removeMember(target) }
            let agentRunning = await ControlClient.groupChanged(node.dataDirectory)
            let out = Output()
            out.line(
                "removed \(removal.removed.name) (\(removal.removed.deviceID)); the group is now in epoch \(removal.epoch)"
            )
            out.line(
                "the new key is sealed to \(removal.sealedFor.count) member\(removal.sealedFor.count == 1 ? "" : "s"): "
                    + (removal.sealedFor.map(\.name).joined(separator: ", ").isEmpty
                        ? "none" : removal.sealedFor.map(\.name).joined(separator: ", "))
            )
            if !removal.withoutKey.isEmpty {
                out.line(
                    "no pinned key, cannot open it (add them again with `lansync group invite`): "
                        + removal.withoutKey.map(\.name).joined(separator: ", ")
                )
            }
            out.line(
                agentRunning
                    ? "the agent switched to the new key; members get it when they next connect"
                    : "no agent is running here: the new key is used when `lansync run` starts"
            )
        }
    }

    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a new device on this network join with a short code (the agent must be running).",
            discussion: """
                Prints an 8-digit code and keeps a pairing window open for --minutes (default 5). On the new device, `lansync group join CODE` finds this one over mDNS and runs CPace, a password-authenticated key exchange keyed by the code: a device that does not know the code gets one guess per attempt, and the window closes after 3 attempts, when its time is up, or once a device joined. Both devices then show the other's name and device ID; the group secret moves only after both proved they hold the code, sealed with the group's member records, so the new device lists the members and holds each to its key from its first connection.

                Waits until a device joined or the window closed (--no-wait returns at once).

                Example:
                  lansync group invite --minutes 10
                """
        )
        @OptionGroup var global: GlobalOptions
        @Option(help: "How long the window stays open (1-60 minutes).") var minutes = 5
        @Flag(help: "Print the code and return; do not wait for the outcome.") var noWait = false

        func validate() throws {
            guard (1...60).contains(minutes) else { throw ValidationError("--minutes must be 1 to 60") }
        }

        func run() async throws {
            let node = try await reportingErrors { try global.openNode() }
            guard try await reportingErrors({ try node.group() }) != nil else {
                note(
                    "lansync: error: this device is in no group; create one (`lansync group create`) or join one first"
                )
                throw ExitCode(1)
            }
            guard let answer = await ControlClient.invite(node.dataDirectory, minutes: minutes) else {
                note(
                    "lansync: error: no agent is running for \(node.dataDirectory.path); start it with `lansync run` (it answers the new device)"
                )
                throw ExitCode(1)
            }
            guard let code = answer["code"] else {
                note("lansync: error: \(answer["error"] ?? "the agent could not open a pairing window")")
                throw ExitCode(1)
            }
            let out = Output()
            out.line(
                "pairing code: \(code)   (open for \(minutes) minute\(minutes == 1 ? "" : "s"), \(PairingWindowText.attempts) attempts)"
            )
            out.line("on the new device, on this network: lansync group join \(code)")
            out.line(
                "(where mDNS does not reach: lansync group join \(code) --from THIS-HOST:\(answer["port"] ?? "?"))"
            )
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

                A node already in a group starts another beside it with --name (a label for this machine only): each group has its own replica, members and peers, and other commands choose one with --group NAME (`lansync groups` lists them).

                Examples:
                  lansync group create
                  lansync group create --name family-b
                """
        )
        @OptionGroup var global: GlobalOptions
        @Option(
            help: "A name for the group on this machine (such as family-b); needed when the node is in a group already."
        )
        var name: String?

        func run() async throws {
            let root = global.nodeDirectory
            let place = try await reportingErrors { try NodeGroups.placeForNewGroup(named: name, in: root) }
            let (node, group) = try await Group.undoingNewDirectory(place) {
                try await reportingErrors {
                    let node = try global.openNode(at: place.directory)
                    let group = try node.createGroup()
                    try await node.recordCreator()
                    return (node, group)
                }
            }
            let out = Output()
            out.line("created group \(group.tag)")
            if let name {
                out.line(
                    "named \(name) on this machine (other commands: --group \(name)) in \(node.dataDirectory.path)"
                )
            }
            out.line("join code: \(group.joinCode)")
            out.line("on each other device: lansync group join \(group.joinCode)")
            if await RunningAgent.nodeGroupsChanged(in: global.nodeDirectory) {
                out.line("the running agent restarts to serve it beside the node's other groups")
            }
        }
    }

    /// Runs `body`, and when it fails removes the group's directory if this command made it: a
    /// failed create or join leaves nothing behind (and a directory that was there stays).
    static func undoingNewDirectory<T>(
        _ place: NodeGroups.NewGroupPlace,
        _ body: () async throws -> T
    ) async throws
        -> T
    {
        do {
            return try await body()
        } catch {
            if place.isNew { try? FileManager.default.removeItem(atPath: place.directory.path) }
            throw error
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Join a group: with its join code, or with a short code a member on this network shows.",
            discussion: """
                A join code (from `lansync group create` or `group show --code`): dashes and case do not matter, and O, I and L are read as 0, 1 and 1; a mistyped code is refused.

                A short code (8 digits, from `lansync group invite` on a member whose agent runs): this device finds the member over mDNS (or at --from HOST:PORT), proves it knows the code with CPace, and receives the group's secret and member records (it prints the members). A wrong code is reported on both devices and costs one of the window's 3 attempts.

                A node already in a group joins another beside it with --name (a label for this machine only), or moves its group (the one --group names, with several) to the new one with --replace: the data it holds goes along and syncs with the new group's devices, so use --name for a group that must not see it.

                Examples:
                  lansync group join 1f4k3mq-9x2vb7c-...
                  lansync group join 4821-3907
                  lansync group join 1f4k3mq-9x2vb7c-... --name family-b
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A join code, or a short code from `lansync group invite`.")
        var code: String
        @Flag(
            help: """
                Leave the current group for this one, or join it in the place of a group this device left; \
                the data held there (entries, preferences, app rows) goes to the new group with the device.
                """
        )
        var replace = false
        @Option(help: "Join beside the node's groups, named NAME on this machine (such as family-b).") var name: String?
        @Option(
            help:
                "With a short code: the inviting device's pairing address (HOST:PORT), instead of looking for it over mDNS."
        )
        var from: String?
        @Option(help: "With a short code: how long to look for the inviting device over mDNS (seconds).") var timeout:
            Double = 10

        /// A short code says which group it joins only once the invite is spent: where the join
        /// would land in the place of a group this device left, it is refused before pairing
        /// (a join code is checked against that group's tag instead, in `joinGroup`).
        private func refuseALeftGroupsPlace(root: DataDirectory) async throws {
            guard !replace,
                let left = try await reportingErrors({ try NodeGroups.leftGroup(selectedBy: name, in: root) })
            else { return }
            note(
                "lansync: error: this node keeps the data of \(left.name) (tag \(left.tag)), a group it left, where this "
                    + "join would go; a short code tells which group it joins only once the invite is spent, so it was "
                    + "not used. To join that same group again with its data, add --replace; to join another group, add "
                    + "--name NAME (another name) to join beside it, or delete that data first with "
                    + "`lansync group leave --erase` (nothing changed)"
            )
            throw ExitCode(1)
        }

        func run() async throws {
            var code = code
            var records: [PreferenceWrite] = []
            let root = global.nodeDirectory
            if replace, name != nil {
                note(
                    "lansync: error: --replace moves a group of this node to the new one, --name adds one beside them: give one"
                )
                throw ExitCode(1)
            }
            let groups = try await reportingErrors { try NodeGroups.list(in: root) }
            // A node in a group joins another only when told how: beside it, or instead of it.
            func refuseWithoutNameOrReplace() throws {
                guard !replace, name == nil, !groups.isEmpty else { return }
                note(
                    "lansync: error: this device is in group \(groups.map(\.tag).joined(separator: ", ")) already: add "
                        + "--name NAME to join the new group beside it (a label for this machine, such as family-b), or "
                        + "--replace to move to the new group (it stops syncing with the one it is in)"
                )
                throw ExitCode(1)
            }
            if PairingCodeText.isShortCode(code) {
                let node = try await reportingErrors { try global.openNode(at: root) }
                try refuseWithoutNameOrReplace()
                try await refuseALeftGroupsPlace(root: root)
                let joined = try await reportingErrors {
                    try await PairingClient.join(
                        code: code,
                        device: node.deviceID,
                        name: node.identity.name,
                        address: from,
                        timeout: timeout
                    )
                }
                Output().line("paired with \(joined.inviterName) (\(joined.inviterDevice))")
                code = joined.joinCode
                records = joined.records
            }
            let joinCode = code
            if let problem = NodeGroups.joinCodeProblem(joinCode) {
                note("lansync: error: \(problem)")
                throw ExitCode(1)
            }
            if !replace, let held = try await reportingErrors({ try NodeGroups.group(joinCode: joinCode, in: root) }) {
                Output().line("already in group \(held.tag) (named \(held.name) on this machine); nothing changed")
                return
            }
            try refuseWithoutNameOrReplace()
            let place = try await reportingErrors {
                replace || (name == nil && groups.isEmpty)
                    ? NodeGroups.NewGroupPlace(directory: try global.selectedDirectory(), isNew: false)
                    : try NodeGroups.placeForNewGroup(named: name, in: root)
            }
            let (node, changed) = try await Group.undoingNewDirectory(place) {
                try await reportingErrors {
                    let node = try global.openNode(at: place.directory)
                    return (node, try node.joinGroup(code: joinCode, replacing: replace))
                }
            }
            // The members and their keys, as the inviter knows them: this device pins their keys
            // from the first connection on, and lists them before it has synced.
            let members = try await reportingErrors {
                _ = try await node.mergeHandedRecords(records)
                return try node.members().filter { $0.removedBy == nil }
            }
            let tag = try await reportingErrors { try node.group()?.tag ?? "" }
            let out = Output()
            out.line(changed ? "joined group \(tag)" : "already in group \(tag); nothing changed")
            if changed, await RunningAgent.nodeGroupsChanged(in: root) {
                out.line("the running agent restarts to serve it")
            }
            if !records.isEmpty {
                out.line("members: " + members.map { "\($0.name) (\($0.deviceID))" }.joined(separator: ", "))
            }
            if changed && records.isEmpty {
                // With the join code alone this device cannot know whether the group pinned an
                // earlier key of its device ID; the members will refuse it if so.
                out.line(
                    "if this device was in the group before (reinstalled, or its data wiped), its members pinned its old key "
                        + "and refuse this one until one vouches for it: run `lansync group invite` on a member, then "
                        + "`lansync group join SHORTCODE --replace` here; `lansync peers` shows a refusal as it happens"
                )
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the group's public tag (exit 1 when in no group).",
            discussion: """
                The tag is a keyed hash of the secret: safe to show, and what devices advertise to find each other. --code prints the join code, to add another device.

                --json prints one object: tag, epoch (0 until a member is removed), data_dir.

                Examples:
                  lansync group show
                  lansync group show --code
                """
        )
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print one JSON object.") var json = false
        @Flag(help: "Print the join code (it carries the secret).") var code = false

        func run() async throws {
            let (node, group) = try await reportingErrors {
                let node = try global.openNode()
                return (node, try node.group())
            }
            guard let group else {
                note(
                    "lansync: this device is in no group; start one with `lansync group create` or join one with `lansync group join CODE`"
                )
                throw ExitCode(1)
            }
            let out = Output()
            if code {
                out.line(group.joinCode)
            } else if json {
                let epoch = (try? node.groupEpochs())??.epoch ?? 0
                out.line(
                    [
                        ("tag", ExportFile.quoted(group.tag)), ("epoch", String(epoch)),
                        ("data_dir", ExportFile.quoted(node.dataDirectory.path)),
                    ].jsonObject
                )
            } else {
                let epoch = (try? node.groupEpochs())??.epoch ?? 0
                out.line(epoch == 0 ? "group \(group.tag)" : "group \(group.tag), epoch \(epoch)")
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Leave a group: tell its members, drop its secret, and keep its data (or erase it with --erase).",
            discussion: """
                With several groups, name the one to leave (its name or tag, or --group). The device first records that it leaves and hands that, with everything it holds that a member lacks (what it wrote, and what it took of other devices' writes), to a member that does not leave too (through the running agent, or an agent it runs for the moment), so the members list it as left (`lansync group members`); then it drops the group's secret and syncs with nobody in it until it joins again. A running agent stops serving the group and goes on with the node's other groups. --erase also deletes the group's replica, secret, peer list and API token from this machine and lists what it deleted: when therapy ends, a family's data leaves the clinic's machine.

                When no member answers within --timeout seconds, the device leaves all the same and says so: its members still list it until one of them removes it (`lansync group remove`). When a member took the news but not all the device holds (an app writing on through the wait, other devices' writes the member lacks), it says that too: the rest stays on this device and reaches the group if it joins again.

                To shut a device out that may not be honest, a member removes it instead (`lansync group remove`): that starts a new group key.

                Examples:
                  lansync group leave
                  lansync group leave family-b --erase
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The group to leave, by name or tag (with several groups).") var name: String?
        @Flag(help: "Also delete the group's files from this machine, and list them.") var erase = false
        @Option(help: "How long to wait for a member to take the news and what this device wrote (seconds).")
        var timeout: Double = 15

        func validate() throws {
            guard timeout >= 0 else { throw ValidationError("--timeout cannot be negative") }
        }

        func run() async throws {
            let root = global.nodeDirectory
            // A group left before: nothing to tell anyone, only its data to erase.
            if let left = try await reportingErrors({
                try NodeGroups.leftGroup(selectedBy: name ?? global.group, in: root)
            }) {
                guard erase else {
                    note(
                        "lansync: error: this device left \(left.name) (tag \(left.tag)) already; its data stays here until "
                            + "`lansync group leave \(left.name) --erase` deletes it"
                    )
                    throw ExitCode(1)
                }
                let erased = try await reportingErrors { try await NodeGroups.erase(left, of: root, waiting: 30) }
                let out = Output()
                out.line("erased the files of \(left.name) (tag \(left.tag)), left before, from this machine:")
                for path in erased { out.line("  \(path)") }
                return
            }
            let group = try await reportingErrors { try NodeGroups.group(selectedBy: name ?? global.group, in: root) }
            let directory = group?.directory ?? root
            let node = try await reportingErrors { try global.openNode(at: directory) }
            let serving = await ControlClient.report(directory)
            if let serving, serving.followsGroupChanges != true {
                note(
                    "lansync: error: an agent serving this group was started by an app and keeps serving it until it "
                        + "stops; stop it, then run this again (nothing changed)"
                )
                throw ExitCode(1)
            }
            let out = Output()
            let left = group.map { " \($0.name) (\($0.tag))" } ?? ""
            let handover = try await reportingErrors { try await node.announceLeaving() }
            let delivery = await LeaveNotice.deliver(handover, of: node, timeout: timeout)
            try await reportingErrors { try node.leaveGroup() }
            out.line("left the group\(left)")
            if !delivery.everything.isEmpty {
                out.line("members told: \(delivery.everything.joined(separator: ", ")) (they hand it on to the others)")
            } else if !delivery.ownWrites.isEmpty {
                out.line(
                    "members told: \(delivery.ownWrites.joined(separator: ", ")) (they hand it on to the others), with "
                        + "everything this device wrote; other devices' writes that it held did not reach a member "
                        + "that stays within \(Int(timeout)) s: they stay here, and reach the group if this device "
                        + "joins it again"
                )
            } else if !delivery.news.isEmpty {
                out.line(
                    "members told: \(delivery.news.joined(separator: ", ")) (they hand it on to the others); what this "
                        + "device wrote since it said so did not reach them within \(Int(timeout)) s: it stays here, and "
                        + "reaches the group if this device joins it again"
                )
            } else {
                out.line(
                    "no member took the news within \(Int(timeout)) s: they list this device as a member until one of "
                        + "them runs `lansync group remove \(node.deviceID)`"
                )
            }
            out.flush()
            // The agent serving the group stops serving it (and goes on with the node's other groups).
            if serving != nil {
                let told = await RunningAgent.nodeGroupsChanged(in: root, also: directory)
                guard told, await RunningAgent.stopsServing(directory, within: 30) else {
                    note(
                        "lansync: error: the running agent still serves this group; stop it and start it again (`lansync run`)"
                            + (erase ? ", then delete the group's files: the group is left but not erased" : "")
                    )
                    throw ExitCode(1)
                }
                out.line("the running agent no longer serves it")
            }
            if erase {
                let erased = try await reportingErrors {
                    guard let group else { throw LANSyncError(.invalidInput, "this device is in no group") }
                    do throws(LANSyncError) {
                        return try await NodeGroups.erase(group, of: root, waiting: 30)
                    } catch {
                        throw LANSyncError(
                            error.code,
                            "the group is left but its files are still here: \(error.message)"
                        )
                    }
                }
                out.line("erased its files from this machine:")
                for path in erased { out.line("  \(path)") }
            } else {
                out.line("its data stays here; this device syncs with nobody in it until `lansync group join CODE`")
            }
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

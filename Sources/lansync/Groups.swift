import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Groups: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the groups this node is in: name, tag, members, entries, and whether each is in sync.",
        discussion: """
            A node can be in several groups (a therapy room's machine serving several families): each has its own replica, secret, members and peers, and nothing of one reaches another. The first group lives in the data directory itself; others in groups/NAME/. Names are labels for this machine only.

            Add a group beside the first with --name, then name it in other commands with --group (by name or tag):
              lansync group create --name family-b
              lansync group join 1f4k3mq-9x2vb7c-... --name family-c
              lansync --group family-b log list symbol_taps
              lansync run                            (serves every group, on one port)

            --json prints one object per line: name, tag, data_dir, members, entries, agent_running, sync (what `lansync peers` says of it), last_sync (ISO 8601, or null).

            Examples:
              lansync groups
              lansync groups --json | jq -r .name
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "One JSON object per line.") var json = false

    func run() async throws {
        let groups = try await reportingErrors { try NodeGroups.list(in: global.nodeDirectory) }
        let out = Output()
        guard !groups.isEmpty else {
            if !json {
                out.line(
                    "this node is in no group; start one with `lansync group create` or join one with `lansync group join CODE`"
                )
            }
            return
        }
        var rows = [["NAME", "TAG", "MEMBERS", "ENTRIES", "SYNC", "LAST SYNC"]]
        for group in groups {
            let (node, entries, members) = try await reportingErrors {
                let node = try global.openNode(at: group.directory)
                return (node, try node.status().entries, try node.members().filter(\.isPresent).count)
            }
            let agent = await ControlClient.report(node.dataDirectory)
            let sync = agent.map(PeersView.verdict) ?? "agent not running"
            let lastSync = (agent?.peers ?? ControlClient.savedPeers(node.dataDirectory)).compactMap(\.lastSync).max()
            let lastSyncText = lastSync.map { Timestamps.iso8601(milliseconds: $0) }
            if json {
                out.line(
                    [
                        ("name", ExportFile.quoted(group.name)), ("tag", ExportFile.quoted(group.tag)),
                        ("data_dir", ExportFile.quoted(group.directory.path)), ("members", "\(members)"),
                        ("entries", "\(entries)"), ("agent_running", agent == nil ? "false" : "true"),
                        ("sync", ExportFile.quoted(sync)), ("last_sync", lastSyncText.map(ExportFile.quoted) ?? "null"),
                    ].jsonObject
                )
            } else {
                rows.append([group.name, group.tag, "\(members)", "\(entries)", sync, lastSyncText ?? "never"])
            }
        }
        if !json { for line in aligned(rows) { out.line(line) } }
    }
}

import ArgumentParser
import Foundation
import LANSync

struct Dashboard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a one-time link that opens this node's dashboard in a browser.",
        discussion: """
            The dashboard shows the group (who is connected, who is in sync, who is behind and by how much, refused devices and why), each stream (entries per day by device and by a payload field such as caregiver, as charts; the newest entries; CSV and JSON export), the usage report and regression flags, app tables and preferences. It is served by the running agent on this machine only (see `lansync help api`).

            On a node of several groups (a therapy room's machine) the dashboard opens on the list of groups (devices, in sync or behind, today's activity), and each group keeps its own pages; with --group NAME the link opens that group's pages alone.

            The link works once, within five minutes; the browser session it opens lasts twelve hours or until the agent restarts. Anyone who can run this command as you could read the data directly anyway.

            Examples:
              lansync dashboard
              lansync dashboard --open      (opens it with xdg-open)
              lansync dashboard --group family-b   (that family's pages alone)
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Open the link in the desktop's browser (xdg-open).") var open = false

    /// Where the API that serves the dashboard is, which token asks it, and for which route: on a
    /// node of several groups, the node's token for every group; with --group, that group's token
    /// for its pages alone (through the agent serving every group, or one running for it alone).
    func target() async throws -> (directory: String, tokenFile: String?, path: String) {
        let root = global.nodeDirectory
        let groups = try await reportingErrors { try NodeGroups.list(in: root) }
        let serving = { (directory: DataDirectory) in
            FileManager.default.fileExists(atPath: directory.path + "/api-address")
        }
        if global.group == nil, groups.count > 1 {
            return (groups[0].directory.path, root.path + "/node-api-token", "/v1/dashboard/links")
        }
        let directory = try await reportingErrors { try global.selectedDirectory() }
        if !serving(directory), groups.count > 1, serving(groups[0].directory),
            let group = groups.first(where: { $0.directory.path == directory.path })
        {
            return (
                groups[0].directory.path, directory.path + "/api-token",
                "/v1/groups/\(group.name)/dashboard/links"
            )
        }
        return (directory.path, nil, "/v1/dashboard/links")
    }

    func run() async throws {
        let (directory, tokenFile, linkPath) = try await target()
        guard
            let address = try? String(contentsOfFile: directory + "/api-address", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines
            ),
            !address.isEmpty
        else {
            note(
                "lansync: error: the agent is not running for \(directory), or runs with --no-api; start it with `lansync run`"
            )
            throw ExitCode(1)
        }
        let answer: (status: Int, body: String)
        do {
            answer = try LocalAPIClient.request("POST", linkPath, dataDirectory: directory, tokenFile: tokenFile)
        } catch let failure as LocalAPIClient.Failure {
            note("lansync: error: \(failure.message)")
            throw ExitCode(1)
        }
        guard answer.status == 201,
            let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
            let path = object["path"] as? String
        else {
            note("lansync: error: the agent refused to make a link (HTTP \(answer.status)): \(answer.body)")
            throw ExitCode(1)
        }
        let link = "http://\(address)\(path)"
        let out = Output()
        out.line(link)
        out.flush()
        note("open it within five minutes, on this machine; it works once")
        if open {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["xdg-open", link]
            do { try process.run() } catch {
                note("lansync: warning: could not run xdg-open (\(error)); open the link yourself")
            }
        }
    }
}

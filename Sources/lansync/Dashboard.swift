import ArgumentParser
import Foundation

struct Dashboard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a one-time link that opens this node's dashboard in a browser.",
        discussion: """
            The dashboard shows the group (who is connected, who is in sync, who is behind and by how much, refused devices and why), each stream (entries per day by device and by a payload field such as caregiver, as charts; the newest entries; CSV and JSON export), the usage report and regression flags, app tables and preferences. It is served by the running agent on this machine only (see `lansync help api`).

            The link works once, within five minutes; the browser session it opens lasts twelve hours or until the agent restarts. Anyone who can run this command as you could read the data directly anyway.

            Examples:
              lansync dashboard
              lansync dashboard --open      (opens it with xdg-open)
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Open the link in the desktop's browser (xdg-open).") var open = false

    func run() async throws {
        let directory = try await reportingErrors { try global.selectedDirectory() }.path
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
            answer = try LocalAPIClient.request("POST", "/v1/dashboard/links", dataDirectory: directory)
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

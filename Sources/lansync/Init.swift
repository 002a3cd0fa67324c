import ArgumentParser
import Foundation
import LANSync

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create this machine's node: its identity and an empty replica.",
        discussion: """
            The device ID is derived from /etc/machine-id with an app-specific keyed hash, so deleting the data directory and running init again on the same machine gives back the same device ID (with a new key pair and a new replica ID). Where the machine has no machine-id, init says so and uses a random device ID, which lasts as long as the data directory.

            Running init on a node that exists changes nothing.

            Example:
              lansync init --name therapy-room
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("A name people recognise, e.g. home-desktop.", discussion: "Default: the host name."))
    var name: String?

    @Option(
        name: .customLong("machine-id-file"),
        help: ArgumentHelp(
            "Where to read the machine ID (for containers and tests).",
            discussion: "Default: $LANSYNC_MACHINE_ID_FILE, else /etc/machine-id.",
            valueName: "path"
        )
    )
    var machineIDFile: String?

    func validate() throws {
        if let name, let problem = LANSyncNode.deviceNameProblem(name) { throw ValidationError(problem) }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let machineIDPath = machineIDFile ?? environment["LANSYNC_MACHINE_ID_FILE"] ?? "/etc/machine-id"
        let directory = global.nodeDirectory
        let report = try await reportingErrors {
            try LANSyncNode.initialize(at: directory, name: name, machineIDPath: machineIDPath)
        }
        let out = Output()
        if !report.changedAnything {
            out.line("already initialised in \(directory.path); nothing changed")
        } else {
            if let problem = report.machineIDProblem {
                note(
                    "lansync: warning: \(problem), so this device got a random device ID. It stays the same as long "
                        + "as \(directory.identityPath) exists; keep a backup of it."
                )
            }
            if report.identityCreated {
                out.line("created a new identity in \(directory.identityPath)")
            } else {
                out.line("kept the identity in \(directory.identityPath)")
            }
            if report.replicaCreated { out.line("created an empty replica in \(directory.replicaPath)") }
        }
        out.line("device ID   \(report.identity.deviceID)")
        out.line("name        \(report.identity.name)")
        out.line("replica ID  \(report.replicaID)")
    }
}

struct ID: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "id",
        abstract: "Show this device's ID, name and public key.",
        discussion: """
            Example:
              lansync id
              lansync id --json | jq -r .device_id
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print one JSON object (device_id, name, public_key, device_id_source, replica_id).")
    var json = false

    func run() async throws {
        let node = try await reportingErrors { try global.openNode() }
        let identity = node.identity
        let out = Output()
        if json {
            out.line(
                [
                    ("device_id", ExportFile.quoted(identity.deviceID.description)),
                    ("name", ExportFile.quoted(identity.name)),
                    ("public_key", ExportFile.quoted(identity.publicKeyHex)),
                    ("device_id_source", ExportFile.quoted(identity.source.rawValue)),
                    ("replica_id", ExportFile.quoted(node.replicaID.description)),
                ].jsonObject
            )
        } else {
            for line in aligned([
                ["device ID", identity.deviceID.description],
                ["name", identity.name],
                ["public key", identity.publicKeyHex],
                [
                    "derived from",
                    identity.source == .machineID ? "this machine's machine-id" : "random (no machine-id)",
                ],
                ["replica ID", node.replicaID.description],
            ]) { out.line(line) }
        }
    }
}

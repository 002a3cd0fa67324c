import Foundation
import LANSyncCore
import LANSyncIdentity
import Testing

/// Each test has a directory of its own, removed when the test ends.
@Suite final class IdentityTests {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "lansync-identity-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func machineIDFile(_ contents: String) throws -> String {
        let path = directory + "/machine-id-\(UUID().uuidString)"
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func deviceIDIsStableAndNeverTheMachineID() throws {
        let machineID = "4c1a9e0ef2c34b0fa3e5d7c8b9a01234"
        let first = try DeviceIDDerivation.deviceID(machineIDPath: machineIDFile(machineID + "\n")).get()
        let again = try DeviceIDDerivation.deviceID(machineIDPath: machineIDFile(machineID)).get()
        let other = try DeviceIDDerivation.deviceID(machineIDPath: machineIDFile("0" + machineID.dropFirst())).get()
        #expect(first == again)
        #expect(first != other)
        #expect(first.bytes.hexString != String(machineID.prefix(32)))
        #expect(!first.bytes.hexString.contains(machineID.prefix(8)))
    }

    @Test func unusableMachineIDsAreReported() throws {
        let missing = directory + "/nope"
        #expect(throws: DeviceIDDerivation.MachineIDProblem.missing(path: missing)) {
            try DeviceIDDerivation.deviceID(machineIDPath: missing).get()
        }
        let empty = try machineIDFile("\n")
        #expect(throws: DeviceIDDerivation.MachineIDProblem.empty(path: empty)) {
            try DeviceIDDerivation.deviceID(machineIDPath: empty).get()
        }
        let junk = try machineIDFile("not a machine id")
        #expect(throws: DeviceIDDerivation.MachineIDProblem.malformed(path: junk)) {
            try DeviceIDDerivation.deviceID(machineIDPath: junk).get()
        }
    }

    @Test func factoryFallsBackToARandomID() throws {
        let (identity, problem) = IdentityFactory.make(name: "lab", machineIDPath: directory + "/missing")
        #expect(identity.source == .random)
        #expect(problem != nil)
        let (other, _) = IdentityFactory.make(name: "lab", machineIDPath: directory + "/missing")
        #expect(identity.deviceID != other.deviceID)
    }

    @Test func identityFileRoundTripsWithOwnerOnlyPermissions() throws {
        let (identity, _) = IdentityFactory.make(
            name: "home-desktop",
            machineIDPath: try machineIDFile("ab" + String(repeating: "1", count: 30))
        )
        let file = IdentityFile(path: directory + "/identity.json")
        try file.save(identity)
        #expect(SecretFile.permissions(of: file.path) == 0o600)
        let loaded = try #require(try file.load())
        #expect(loaded.deviceID == identity.deviceID)
        #expect(loaded.name == "home-desktop")
        #expect(loaded.source == .machineID)
        #expect(loaded.keyPair.publicKey == identity.keyPair.publicKey)
        #expect(loaded.keyPair.secretKey.constantTimeEquals(identity.keyPair.secretKey))
    }

    @Test func missingIdentityFileIsNilAndDamagedOneIsAnError() throws {
        #expect(try IdentityFile(path: directory + "/none.json").load() == nil)
        let damaged = directory + "/damaged.json"
        try "{\"format\":\"lansync-identity\"".write(toFile: damaged, atomically: true, encoding: .utf8)
        #expect(throws: IdentityFile.Failure.self) { try IdentityFile(path: damaged).load() }
        let (identity, _) = IdentityFactory.make(name: "x", machineIDPath: "/nonexistent")
        let tampered = directory + "/tampered.json"
        try IdentityFile(path: tampered).save(identity)
        var text = try String(contentsOfFile: tampered, encoding: .utf8)
        text = text.replacingOccurrences(of: identity.publicKeyHex, with: String(repeating: "0", count: 64))
        try text.write(toFile: tampered, atomically: true, encoding: .utf8)
        #expect(throws: IdentityFile.Failure.self) { try IdentityFile(path: tampered).load() }
    }
}

import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

/// The membership rules (protocol §11) over random records: four devices, each with its first key
/// and a reinstalled one; observations, vouches, removals signed by the remover and forged ones,
/// at random times. Every member holding the same records must derive the same members, forgeries
/// must count for nothing, and "removed" must mean exactly what the counting records say.
@Suite struct MembershipPropertyTests {
    static let devices = [
        "AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA", "BBBBBBB-BBBBBBB-BBBBBBB-BBBBBBB", "CCCCCCC-CCCCCCC-CCCCCCC-CCCCCCC",
        "DDDDDDD-DDDDDDD-DDDDDDD-DDDDDDD",
    ]
    /// Per device, its key before and after a reinstall.
    static let keys = devices.map { _ in [KeyPair.generate(), KeyPair.generate()] }

    static func json(_ value: some Encodable) -> String {
        String(decoding: try! JSONEncoder().encode(value), as: UTF8.self)
    }

    static func time(_ second: Int) -> String {
        String(format: "2026-11-23T00:%02d:%02d.000Z", second / 60 % 60, second % 60)
    }

    struct Scenario {
        /// Each write's HLC stamp is its place in the scenario (causal order), while the wall-clock
        /// times the records carry are random: clocks that disagree.
        var records: [(key: String, value: String, stamp: HybridTimestamp)] = []
        /// Epoch records whose signature is not their remover's.
        var forgedKeys: Set<String> = []
    }

    /// A scenario from random numbers: each picks an operation, its devices, key version and time.
    static func scenario(_ seeds: [Int]) -> Scenario {
        var scenario = Scenario()
        var epoch: UInt64 = 0
        for (index, seed) in seeds.enumerated() {
            let stamp = HybridTimestamp(rawValue: UInt64(index + 1))
            let device = seed / 7 % 4
            let other = seed / 31 % 4
            let version = seed / 131 % 2
            let at = time(seed / 523 % 3_600)
            switch seed % 6 {
            case 0, 1:
                // Each observer keeps one observation per device (its own key, overwritten).
                let key = MemberKeysForTests.seen(devices[device], by: devices[other])
                scenario.records.removeAll { $0.key == key }
                let pair = keys[device][version]
                scenario.records.append(
                    (
                        key,
                        json(
                            KeyObservation(
                                name: "device-\(device)",
                                key: pair.publicKey.hexString,
                                signingKey: SigningKey(derivedFrom: pair).publicKey.hexString,
                                at: at
                            )
                        ), stamp
                    )
                )
            case 2:
                let key = "lansync/member/" + devices[device].lowercased()
                scenario.records.removeAll { $0.key == key }
                scenario.records.append(
                    (
                        key,
                        json(
                            GroupMember(
                                deviceID: devices[device],
                                name: "device-\(device)",
                                key: nil,
                                addedBy: devices[other],
                                addedAt: at,
                                via: "short code"
                            )
                        ), stamp
                    )
                )
            default:
                epoch += 1
                let forged = seed % 6 == 5
                var record = EpochRecord(
                    epoch: epoch,
                    removed: [devices[device]],
                    by: devices[other],
                    at: at,
                    tag: "t\(index)",
                    sealed: [:]
                )
                // Signed with the remover's key of this version; a forgery with another device's.
                let signer = forged ? keys[(other + 1) % 4][version] : keys[other][version]
                record.signature = Data(SigningKey(derivedFrom: signer).sign(record.signedText)).base64EncodedString()
                let key = "lansync/epoch/\(epoch)"
                scenario.records.append((key, json(record), stamp))
                if forged { scenario.forgedKeys.insert(key) }
            }
        }
        return scenario
    }

    static let seeds = Gen.int(in: 0...10_000_000).array(of: 1...40)

    /// The generator reaches what the properties are about: removals that count, removed
    /// devices, re-vouched ones, forgeries (else the properties would hold vacuously).
    @Test func theScenariosReachRemovalsAndForgeries() {
        var counting = 0
        var removed = 0
        var forged = 0
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let seeds = (0..<30).map { _ in Int.random(in: 0...10_000_000, using: &generator) }
            let scenario = Self.scenario(seeds)
            let derived = GroupMembership.derive(from: scenario.records)
            counting += derived.epochs.count
            removed += derived.members.filter(\.isRemoved).count
            forged += scenario.forgedKeys.count
        }
        #expect(
            counting > 50 && removed > 50 && forged > 50,
            "counting \(counting), removed \(removed), forged \(forged)"
        )
    }

    @Test func everyOrderOfTheRecordsGivesTheSameMembers() async {
        await propertyCheck(input: Self.seeds) { seeds in
            let scenario = Self.scenario(seeds)
            let derived = GroupMembership.derive(from: scenario.records)
            for order in [
                Array(scenario.records.reversed()),
                Array(scenario.records.dropFirst(seeds.count / 2) + scenario.records.prefix(seeds.count / 2)),
            ] {
                let other = GroupMembership.derive(from: order)
                #expect(derived.members == other.members)
                #expect(derived.epochs == other.epochs)
            }
        }
    }

    @Test func forgedEpochRecordsCountForNothing() async {
        await propertyCheck(input: Self.seeds) { seeds in
            let scenario = Self.scenario(seeds)
            let derived = GroupMembership.derive(from: scenario.records)
            let honest = GroupMembership.derive(from: scenario.records.filter { !scenario.forgedKeys.contains($0.key) })
            #expect(derived.members == honest.members)
            #expect(derived.epochs.allSatisfy { !scenario.forgedKeys.contains("lansync/epoch/\($0.epoch)") })
        }
    }

    /// "Removed" is exactly: listed by a record that counts, with no vouch stamped after it; a
    /// record counts only when its remover's pinned signing key verifies it and the remover was
    /// not removed by an earlier one; a pinned key is the earliest observation's without a vouch,
    /// and with one the earliest of those stamped after it, whatever the wall-clock times say.
    @Test func removalsAndPinnedKeysFollowTheRules() async {
        await propertyCheck(input: Self.seeds) { seeds in
            let scenario = Self.scenario(seeds)
            let derived = GroupMembership.derive(from: scenario.records)
            let members = Dictionary(uniqueKeysWithValues: derived.members.map { ($0.deviceID, $0) })
            let vouches = Dictionary(
                uniqueKeysWithValues: scenario.records.compactMap { record -> (String, HybridTimestamp)? in
                    guard record.key.hasPrefix("lansync/member/"),
                        let member = try? JSONDecoder().decode(GroupMember.self, from: Data(record.value.utf8))
                    else { return nil }
                    return (member.deviceID, record.stamp)
                }
            )
            let stamps = Dictionary(uniqueKeysWithValues: scenario.records.map { ($0.key, $0.stamp) })
            func vouchedAfter(_ device: String, _ record: EpochRecord) -> Bool {
                (vouches[device] ?? .zero) > stamps["lansync/epoch/\(record.epoch)"]!
            }
            var removedBefore = Set<String>()
            for record in derived.epochs {
                #expect(!removedBefore.contains(record.by), "a removed remover's record counted")
                #expect(record.isSigned(by: members[record.by]?.signingKey))
                for device in record.removed where !vouchedAfter(device, record) { removedBefore.insert(device) }
            }
            for member in derived.members {
                let listed = derived.epochs.contains {
                    $0.removed.contains(member.deviceID) && !vouchedAfter(member.deviceID, $0)
                }
                #expect(member.isRemoved == listed, "\(member.deviceID): removed \(member.isRemoved), listed \(listed)")
                // The earliest observation's key (by time, then observer), of those stamped after the vouch if any.
                let vouch = vouches[member.deviceID]
                let earliest = scenario.records.filter {
                    $0.key.hasPrefix("lansync/seen/" + member.deviceID.lowercased() + "/")
                }
                .filter { vouch == nil || $0.stamp > vouch! }
                .compactMap { record -> (String, String, String)? in
                    guard
                        let observation = try? JSONDecoder().decode(KeyObservation.self, from: Data(record.value.utf8))
                    else { return nil }
                    return (
                        observation.at, String(record.key.split(separator: "/").last!).uppercased(), observation.key
                    )
                }.min { ($0.0, $0.1) < ($1.0, $1.1) }
                #expect(member.key == earliest?.2)
            }
        }
    }
}

/// The record keys as the protocol spells them (§11), written out here so the test checks them.
enum MemberKeysForTests {
    static func seen(_ device: String, by observer: String) -> String {
        "lansync/seen/" + device.lowercased() + "/" + observer.lowercased()
    }
}

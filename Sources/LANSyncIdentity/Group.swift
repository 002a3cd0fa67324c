import Foundation
import LANSyncCore
package import LANSyncCrypto

/// Membership of a group: the 256-bit group secret every member holds, and what is derived from it.
///
/// Only members can take part in sync: the secret, through `noisePSK`, is the pre-shared key of
/// every handshake. Nothing derived for package use (`tag`) reveals it.
package struct GroupSecret: Sendable {
    package let secret: SecureBytes

    package init(secret: SecureBytes) {
        precondition(secret.count == 32, "a group secret is 32 bytes")
        self.secret = secret
    }

    /// A new random group.
    package static func generate() -> GroupSecret { GroupSecret(secret: SecureBytes(randomCount: 32)) }

    /// Domain-separated subkeys: HMAC-SHA256 keyed with the secret over a fixed label.
    func derive(_ label: String) -> [UInt8] { SHA256.hmac(key: secret, message: Array(label.utf8)) }

    /// The Noise pre-shared key for handshakes between members.
    package var noisePSK: SecureBytes {
        var key = derive("lansync/v1/noise-psk")
        defer { wipe(&key) }
        return SecureBytes(copying: key)
    }

    /// A name for the group (16 hex digits) shown to its members by `group show` and `status`.
    /// A keyed hash: the secret cannot be recovered from it. It is never advertised: mDNS carries
    /// `advertisedTag(period:)`, which changes every period.
    package var tag: String { Array(derive("lansync/v1/group-tag").prefix(8)).hexString }

    /// The tag advertised over mDNS during one period (16 hex digits): a keyed hash of the period
    /// number, so members recognise each other while an observer, who cannot compute it, sees an
    /// unrelated value each period and cannot follow a family's devices from home to the clinic.
    package func advertisedTag(period: Int64) -> String {
        Array(derive("lansync/v2/mdns-tag/\(period)").prefix(8)).hexString
    }

    /// The period a moment falls in: whole periods of `length` seconds since the Unix epoch (UTC days by default).
    package static func tagPeriod(atSeconds seconds: Int64, length: Int64 = tagPeriodSeconds) -> Int64 {
        seconds >= 0 ? seconds / length : (seconds - length + 1) / length
    }

    /// A day: the tag changes at midnight UTC.
    package static let tagPeriodSeconds: Int64 = 86_400

    /// The tags a member accepts at a moment: the current period's and both neighbours', so
    /// nodes stay together across midnight and with clocks a period apart at most.
    package func acceptedTags(atSeconds seconds: Int64, length: Int64 = tagPeriodSeconds) -> Set<String> {
        let period = Self.tagPeriod(atSeconds: seconds, length: length)
        return [advertisedTag(period: period - 1), advertisedTag(period: period), advertisedTag(period: period + 1)]
    }

    // MARK: Join codes

    /// The join code: one line to read aloud or type, e.g.
    /// `1f4k3mq-9x2vb7c-...` — eight groups of seven characters in Crockford's base32 (no I, L,
    /// O or U, case-insensitive), carrying a version byte, the secret and a 2-byte checksum, so a
    /// mistyped code is refused rather than joining nobody.
    package var joinCode: String {
        var payload = [Self.codeVersion] + secret.withUnsafeBytes { [UInt8]($0) }
        payload += Self.checksum(payload)
        defer { wipe(&payload) }
        let digits = Array(String(decoding: Base32.crockford.encode(payload), as: UTF8.self))
        return stride(from: 0, to: digits.count, by: 7).map {
            String(digits[$0..<min($0 + 7, digits.count)])
        }.joined(separator: "-")
    }

    static let codeVersion: UInt8 = 1

    /// Why a join code is unusable, or the group it names.
    package static func parse(joinCode code: String) -> Result<GroupSecret, JoinCodeProblem> {
        var digits = [UInt8]()
        for character in code.lowercased() where character != "-" && !character.isWhitespace {
            // Crockford's rule: read the letters people confuse with digits as those digits.
            let normalised: Character =
                character == "o" ? "0" : (character == "i" || character == "l") ? "1" : character
            guard let ascii = normalised.asciiValue, Base32.crockford.alphabet.contains(ascii) else {
                return .failure(.badCharacter(character))
            }
            digits.append(ascii)
        }
        guard digits.count == 56 else { return .failure(.wrongLength(digits.count)) }
        guard var bytes = Base32.crockford.decode(digits) else { return .failure(.checksumMismatch) }
        defer { wipe(&bytes) }
        guard bytes.count == 35, bytes[0] == codeVersion else { return .failure(.unknownVersion) }
        guard checksum(Array(bytes[0..<33])) == Array(bytes[33..<35]) else { return .failure(.checksumMismatch) }
        return .success(GroupSecret(secret: SecureBytes(copying: Array(bytes[1..<33]))))
    }

    package enum JoinCodeProblem: Error, Equatable, CustomStringConvertible {
        case badCharacter(Character)
        case wrongLength(Int)
        case unknownVersion
        case checksumMismatch

        package var description: String {
            switch self {
            case .badCharacter(let character):
                return "the join code has a character that cannot be in one: '\(character)'"
            case .wrongLength(let count):
                return "a join code has 56 characters (plus dashes); this one has \(count)"
            case .unknownVersion:
                return "this join code is from a newer LANSync; upgrade lansync"
            case .checksumMismatch:
                return "the join code does not check out: a character is mistyped; compare it with the code shown by "
                    + "`lansync group show --code` on a member device"
            }
        }
    }

    static func checksum(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(bytes).prefix(2)) }
}

/// A group's secrets over its epochs. Removing a member starts a new epoch with a fresh secret
/// (see `docs/protocol.md` §11); a member keeps the secrets of a few earlier epochs so that it can
/// still recognise, and hand the new secret to, a member that was away during the removal.
package struct GroupEpochs: Sendable {
    /// The current epoch's secret: what this member's handshakes use and its mDNS tag derives from.
    package var current: GroupSecret
    /// 0 for a new group; one more with each removal.
    package var epoch: UInt64
    /// Earlier epochs, newest first, at most `keptEpochs`.
    package var previous: [(epoch: UInt64, group: GroupSecret)]

    /// Earlier epochs kept: a member away for this many removals in a row still gets back in.
    package static let keptEpochs = 4

    package init(current: GroupSecret, epoch: UInt64 = 0, previous: [(epoch: UInt64, group: GroupSecret)] = []) {
        self.current = current
        self.epoch = epoch
        self.previous = previous
    }

    /// The next epoch with `secret`: the current one becomes the newest earlier one.
    package func advanced(to epoch: UInt64, secret: GroupSecret) -> GroupEpochs {
        precondition(epoch > self.epoch, "epochs only move forward")
        return GroupEpochs(
            current: secret,
            epoch: epoch,
            previous: Array(([(self.epoch, current)] + previous).prefix(Self.keptEpochs))
        )
    }

    /// Every epoch held, the current one first.
    package var all: [(epoch: UInt64, group: GroupSecret)] { [(epoch, current)] + previous }
}

/// The group file, `group.json` in the data directory, mode 0600.
package struct GroupFile: Sendable {
    package let path: String

    package init(path: String) { self.path = path }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// Version 2 adds the epoch and the earlier epochs' secrets; a version-1 file is epoch 0.
    private struct Contents: Codable {
        struct Earlier: Codable {
            var epoch: UInt64
            var secret: String
        }
        var format = "lansync-group"
        var version = 2
        var secret: String
        var epoch: UInt64?
        var previous: [Earlier]?
        var joined: String
    }

    private var damaged: Failure {
        Failure(description: "\(path) is damaged; run `lansync group join CODE` again with a member's code")
    }

    private func secret(_ hex: String) throws(Failure) -> GroupSecret {
        guard var bytes = [UInt8](hexString: hex), bytes.count == 32 else { throw damaged }
        defer { wipe(&bytes) }
        return GroupSecret(secret: SecureBytes(copying: bytes))
    }

    /// The current epoch's secret, or nil when this device is in no group.
    package func load() throws(Failure) -> GroupSecret? { try loadEpochs()?.current }

    package func loadEpochs() throws(Failure) -> GroupEpochs? {
        let bytes: [UInt8]?
        do { bytes = try SecretFile.read(path) } catch { throw Failure(description: error.description) }
        guard let bytes else { return nil }
        guard let contents = try? JSONDecoder().decode(Contents.self, from: Data(bytes)),
            contents.format == "lansync-group",
            (1...2).contains(contents.version)
        else { throw damaged }
        var previous = [(epoch: UInt64, group: GroupSecret)]()
        for earlier in contents.previous ?? [] { previous.append((earlier.epoch, try secret(earlier.secret))) }
        return GroupEpochs(current: try secret(contents.secret), epoch: contents.epoch ?? 0, previous: previous)
    }

    package func save(_ group: GroupSecret, joined: String) throws(Failure) {
        try save(GroupEpochs(current: group), joined: joined)
    }

    package func save(_ epochs: GroupEpochs, joined: String) throws(Failure) {
        func hex(_ group: GroupSecret) -> String { group.secret.withUnsafeBytes { [UInt8]($0).hexString } }
        let contents = Contents(
            secret: hex(epochs.current),
            epoch: epochs.epoch,
            previous: epochs.previous.map { Contents.Earlier(epoch: $0.epoch, secret: hex($0.group)) },
            joined: joined
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try SecretFile.write([UInt8](try encoder.encode(contents)) + [0x0A], to: path)
        } catch let error as SecretFile.Failure {
            throw Failure(description: error.description)
        } catch {
            throw Failure(description: "cannot encode the group file: \(error)")
        }
    }

    /// When this device joined (or created) the group, as the file says.
    package func joined() -> String? {
        guard let bytes = try? SecretFile.read(path),
            let contents = try? JSONDecoder().decode(Contents.self, from: Data(bytes))
        else {
            return nil
        }
        return contents.joined
    }

    package func remove() throws(Failure) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw Failure(description: "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
    }
}

import Foundation
package import LANSyncCore
package import LANSyncCrypto
package import LANSyncWire

/// Pairing by short code (protocol §9), as two pure state machines: no sockets, no clocks. The
/// agent that opened a pairing window runs a `PairingInviter` per connection; `lansync group
/// join CODE` runs a `PairingJoiner`. Each turns a received message into the message to send
/// back and, at the end, an outcome.
///
///     joiner → inviter   hello(session, Ya, joiner's device and name)
///     inviter → joiner   reply(Yb, inviter's device and name, inviter's confirmation)
///     joiner → inviter   confirm(joiner's confirmation)          (after checking the inviter's)
///     inviter → joiner   welcome(group secret and member records sealed with the session key)
///
/// Both confirmations are keyed hashes of CPace's session key: each side learns that the other
/// used the same code before anything secret moves, and a wrong code costs the guesser the whole
/// run. The inviter counts every run that does not end in a confirmed joiner as a failed attempt.
package enum PairingCode {
    /// Eight decimal digits, shown as `4821-3907`: log2(10^8) ≈ 26.6 bits. With one guess per
    /// CPace run and three runs per window, a guesser's chance is 3 in 100 million.
    package static let digits = 8
    package static let entropyBits = 26.6

    package static func generate() -> String {
        let number = (0..<digits).map { _ in String(Int.random(in: 0...9)) }.joined()
        return String(number.prefix(4)) + "-" + String(number.suffix(4))
    }

    /// The code's digits, from what a person typed (spaces and dashes ignored); nil when it is not
    /// a short code (a full join code, say).
    package static func parse(_ text: String) -> String? {
        let kept = text.filter { $0 != "-" && !$0.isWhitespace }
        guard kept.count == digits, kept.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return kept
    }

    /// CPace's channel identifier for LANSync pairing.
    static let channel = Array("LANSync pairing v1".utf8)

    /// The keys of one run, from CPace's session key.
    struct Keys {
        let inviterConfirmation: [UInt8]
        let joinerConfirmation: [UInt8]
        let seal: SecureBytes

        init(_ sessionKey: SecureBytes) {
            inviterConfirmation = SHA256.hmac(
                key: sessionKey,
                message: Array("lansync/v1/pairing/inviter-confirms".utf8)
            )
            joinerConfirmation = SHA256.hmac(key: sessionKey, message: Array("lansync/v1/pairing/joiner-confirms".utf8))
            var seal = SHA256.hmac(key: sessionKey, message: Array("lansync/v1/pairing/seal".utf8))
            defer { wipe(&seal) }
            self.seal = SecureBytes(copying: seal)
        }
    }

    /// What identifies a side in CPace's associated data: its device ID, then its name.
    static func associatedData(device: DeviceID, name: String) -> [UInt8] { device.bytes + Array(name.utf8) }

    /// Constant-time comparison of two confirmations.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// Who the other side of a pairing was: shown on both devices when it succeeds.
package struct PairedDevice: Equatable, Sendable {
    package let device: DeviceID
    package let name: String

    package init(device: DeviceID, name: String) {
        self.device = device
        self.name = name
    }
}

/// One step of a pairing machine: what to send (if anything), and how the run ended (if it did).
package struct PairingStep: Sendable {
    package var send: PairingMessage?
    package var outcome: PairingOutcome?

    package init(send: PairingMessage? = nil, outcome: PairingOutcome? = nil) {
        self.send = send
        self.outcome = outcome
    }
}

package enum PairingOutcome: Equatable, Sendable {
    /// The inviter handed the secret to this device.
    case invited(PairedDevice)
    /// The joiner received the group secret (32 bytes) and the group's member records from
    /// this device.
    case joined(secret: [UInt8], records: [PreferenceWrite], inviter: PairedDevice)
    /// The run failed: a wrong code, a protocol violation, or the other side refused.
    case failed(reason: String, wrongCode: Bool)
}

/// The inviting member's side of one run.
package struct PairingInviter: Sendable {
    private enum State: Sendable {
        case awaitingHello
        case awaitingConfirm(keys: PairingCode.KeysBox, joiner: PairedDevice)
        case finished
    }

    private let code: [UInt8]
    private let secret: SecureBytes
    private let records: [UInt8]
    private let me: PairedDevice
    private var state = State.awaitingHello

    /// `records`: the group's member records (`WelcomeRecords`), sealed into the welcome after
    /// the secret, so the newcomer knows the members and their keys before it first syncs.
    package init(code: String, secret: SecureBytes, records: [PreferenceWrite] = [], device: DeviceID, name: String) {
        self.code = Array(code.utf8)
        self.secret = secret
        self.records = WelcomeRecords.encode(records, within: Self.recordBytes).bytes
        me = PairedDevice(device: device, name: name)
    }

    /// Room for records in a welcome: what is left of its largest size after its kind, the
    /// secret and the seal's tag.
    package static let recordBytes = PairingMessage.maxWelcomeBytes - 1 - PairingMessage.sealedBytes

    package mutating func receive(_ message: PairingMessage) -> PairingStep {
        switch (state, message) {
        case (.awaitingHello, .hello(let session, let element, let device, let name)):
            let joiner = PairedDevice(device: device, name: name)
            do {
                let party = try CPaceParty(
                    role: .responder,
                    code: code,
                    channel: PairingCode.channel,
                    session: session,
                    associatedData: PairingCode.associatedData(device: me.device, name: me.name)
                )
                let key = try party.sessionKey(
                    peerElement: element,
                    peerData: PairingCode.associatedData(device: device, name: name)
                )
                let keys = PairingCode.Keys(key)
                state = .awaitingConfirm(keys: PairingCode.KeysBox(keys), joiner: joiner)
                return PairingStep(
                    send: .reply(
                        element: party.element,
                        device: me.device,
                        name: me.name,
                        confirmation: keys.inviterConfirmation
                    )
                )
            } catch {
                return fail("the joining device sent an invalid CPace element", wrongCode: false)
            }
        case (.awaitingConfirm(let box, let joiner), .confirm(let confirmation)):
            guard PairingCode.equal(confirmation, box.keys.joinerConfirmation) else {
                return fail("the code did not match", wrongCode: true)
            }
            state = .finished
            let sealed = secret.withUnsafeBytes { secret in
                ChaChaPoly.seal(
                    key: box.keys.seal,
                    nonce: 0,
                    ad: PairingCode.channel,
                    plaintext: Array(secret) + records
                )
            }
            return PairingStep(send: .welcome(sealed: sealed), outcome: .invited(joiner))
        case (_, .refused(let reason)):
            // A refusal in answer to the reply is the joiner's check of cI failing: a wrong code
            // (told by where it comes, not by its words, which are for people).
            let wrongCode = if case .awaitingConfirm = state { true } else { false }
            state = .finished
            return PairingStep(outcome: .failed(reason: "the joining device gave up: \(reason)", wrongCode: wrongCode))
        case (.finished, _):
            return PairingStep()
        default:
            return fail("the joining device sent a message out of turn", wrongCode: false)
        }
    }

    private mutating func fail(_ reason: String, wrongCode: Bool) -> PairingStep {
        state = .finished
        return PairingStep(send: .refused(reason: reason), outcome: .failed(reason: reason, wrongCode: wrongCode))
    }
}

/// The joining device's side of one run.
package struct PairingJoiner: Sendable {
    private enum State: Sendable {
        case awaitingReply
        case awaitingWelcome(keys: PairingCode.KeysBox, inviter: PairedDevice)
        case finished
    }

    private let party: CPaceParty
    private let me: PairedDevice
    private var state = State.awaitingReply
    /// The message that starts the run.
    package let hello: PairingMessage

    package init(
        code: String,
        device: DeviceID,
        name: String,
        session: [UInt8] = randomBytes(PairingMessage.sessionBytes)
    )
        throws(CryptoError)
    {
        me = PairedDevice(device: device, name: name)
        party = try CPaceParty(
            role: .initiator,
            code: Array(code.utf8),
            channel: PairingCode.channel,
            session: session,
            associatedData: PairingCode.associatedData(device: device, name: name)
        )
        hello = .hello(session: session, element: party.element, device: device, name: name)
    }

    package mutating func receive(_ message: PairingMessage) -> PairingStep {
        switch (state, message) {
        case (.awaitingReply, .reply(let element, let device, let name, let confirmation)):
            let inviter = PairedDevice(device: device, name: name)
            guard
                let key = try? party.sessionKey(
                    peerElement: element,
                    peerData: PairingCode.associatedData(device: device, name: name)
                )
            else { return fail("the inviting device sent an invalid CPace element", wrongCode: false) }
            let keys = PairingCode.Keys(key)
            guard PairingCode.equal(confirmation, keys.inviterConfirmation) else {
                return fail("the code did not match", wrongCode: true)
            }
            state = .awaitingWelcome(keys: PairingCode.KeysBox(keys), inviter: inviter)
            return PairingStep(send: .confirm(confirmation: keys.joinerConfirmation))
        case (.awaitingWelcome(let box, let inviter), .welcome(let sealed)):
            state = .finished
            guard
                let opened = ChaChaPoly.open(key: box.keys.seal, nonce: 0, ad: PairingCode.channel, ciphertext: sealed),
                opened.count >= 32
            else {
                return PairingStep(
                    send: .refused(reason: "the sealed secret did not open"),
                    outcome: .failed(reason: "the inviting device's secret did not open", wrongCode: false)
                )
            }
            // Nothing of a welcome whose records do not read is used, the secret included.
            guard let records = try? WelcomeRecords.decode(Array(opened[32...])) else {
                let reason = "the inviting device's member records did not read"
                return PairingStep(send: .refused(reason: reason), outcome: .failed(reason: reason, wrongCode: false))
            }
            return PairingStep(outcome: .joined(secret: Array(opened[..<32]), records: records, inviter: inviter))
        case (_, .refused(let reason)):
            // A refusal in answer to the confirm is the inviter's check of cJ failing: a wrong code
            // (told by where it comes, not by its words, which are for people).
            let wrongCode = if case .awaitingWelcome = state { true } else { false }
            state = .finished
            return PairingStep(outcome: .failed(reason: "the inviting device refused: \(reason)", wrongCode: wrongCode))
        case (.finished, _):
            return PairingStep()
        default:
            return fail("the inviting device sent a message out of turn", wrongCode: false)
        }
    }

    private mutating func fail(_ reason: String, wrongCode: Bool) -> PairingStep {
        state = .finished
        return PairingStep(send: .refused(reason: reason), outcome: .failed(reason: reason, wrongCode: wrongCode))
    }
}

extension PairingCode {
    /// The keys, as a class so the state enums stay cheap to copy and `Sendable`.
    final class KeysBox: Sendable {
        let keys: Keys
        init(_ keys: Keys) { self.keys = keys }
    }
}

extension PairingCode.Keys: Sendable {}

/// The inviting device's pairing window: how many runs may still start, and until when it is
/// open. Each run takes an attempt when it starts (so a guesser cannot start many runs at once
/// before the first failure is counted); the window closes after `maxAttempts` runs, when its
/// time is up, or once someone joined. A pure value: the agent asks it before each run and tells
/// it how each ended.
package struct PairingWindow: Sendable {
    package let code: String
    package let closesAt: UInt64
    package private(set) var attemptsLeft: Int
    package private(set) var failures: [String] = []
    package private(set) var joined: PairedDevice?

    /// Runs a window allows: one guess each.
    package static let maxAttempts = 3

    package init(code: String, openedAt now: UInt64, minutes: Int) {
        self.code = code
        closesAt = now + UInt64(minutes) * 60_000
        attemptsLeft = Self.maxAttempts
    }

    /// Why the window takes no more runs, or nil while it is open.
    package func closedReason(now: UInt64) -> String? {
        if let joined { return "\(joined.name) joined with this code" }
        if attemptsLeft <= 0 {
            return "\(Self.maxAttempts) attempts were used; open a new window with `lansync group invite`"
        }
        if now >= closesAt { return "the code expired; open a new window with `lansync group invite`" }
        return nil
    }

    /// Takes an attempt for a run about to start; false when the window is closed.
    package mutating func startRun(now: UInt64) -> Bool {
        guard closedReason(now: now) == nil else { return false }
        attemptsLeft -= 1
        return true
    }

    /// Records how a run ended (nil: the connection ended before an outcome).
    package mutating func finishRun(_ outcome: PairingOutcome?) {
        switch outcome {
        case .invited(let device)?: joined = device
        case .failed(let reason, _)?: failures.append(reason)
        default: failures.append("the connection ended before the run did")
        }
    }
}

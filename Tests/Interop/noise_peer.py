#!/usr/bin/env python3
"""An independent Noise peer for LANSync's interoperability test (the `noiseprotocol` package).

Speaks Noise_XXpsk0_25519_ChaChaPoly_SHA256 over stdin/stdout, one hex-encoded message per line:
    noise_peer.py initiator|responder PSK_HEX STATIC_SECRET_HEX PROLOGUE_HEX
After the handshake it prints a JSON line with the peer's static key and the handshake hash,
then echoes each transport message it receives, prefixed with b"echo:", until stdin closes.
"""
import json
import sys

from noise.connection import Keypair, NoiseConnection


def main() -> None:
    role, psk, secret, prologue = sys.argv[1], *(bytes.fromhex(a) for a in sys.argv[2:5])
    noise = NoiseConnection.from_name(b"Noise_XXpsk0_25519_ChaChaPoly_SHA256")
    noise.set_as_initiator() if role == "initiator" else noise.set_as_responder()
    noise.set_psks(psk)
    noise.set_keypair_from_private_bytes(Keypair.STATIC, secret)
    noise.set_prologue(prologue)
    noise.start_handshake()
    # The package drops its handshake state when the handshake ends; keep it to report `rs`.
    state = noise.noise_protocol.handshake_state

    def send(data: bytes) -> None:
        print(data.hex(), flush=True)

    def receive() -> bytes:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        return bytes.fromhex(line.strip())

    writing = role == "initiator"
    while not noise.handshake_finished:
        if writing:
            send(noise.write_message(b"python payload"))
        else:
            noise.read_message(receive())
        writing = not writing
    print(json.dumps({
        "remote_static": state.rs.public_bytes.hex(),
        "handshake_hash": noise.get_handshake_hash().hex(),
    }), flush=True)
    while True:
        send(noise.encrypt(b"echo:" + noise.decrypt(receive())))


if __name__ == "__main__":
    main()

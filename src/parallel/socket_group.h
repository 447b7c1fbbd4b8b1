// A tensor-parallel group over TCP: one rank per process (or thread), on
// one host or several, with the contract of parallel/communicator.h
// (docs/PARALLEL.md, "The socket communicator").
//
// Contract: rank 0 listens on `address`; ranks 1..n_ranks-1 connect to it,
// retrying while it is not listening yet. A handshake then checks that every
// rank was given the same n_ranks, that no rank number is taken twice, and
// that the hosts store floats the same way; any disagreement is an error
// (naming the ranks and what they said) on rank 0 and on every rank that
// had connected. The collectives run through rank 0 (a star): every rank
// sends its part to rank 0, which checks that the ranks called the same
// collective with the same lengths, combines (the sum added in rank order,
// ((r0 + r1) + r2) + ..., the same bits LocalGroup gives) and sends the
// result back. A length or collective that disagrees, a rank that calls
// fail(), disconnects or does not answer within timeout_s is an error on
// every rank naming that rank; the group is then unusable.
//
// Every wait (connecting, the handshake, each collective) ends after
// timeout_s, so no call hangs forever; a rank waiting longer than that for
// the others (a worker idle between requests) gets a timeout error.
// There is no encryption and no authentication: use it only on a trusted
// network.
//
// Threading: one object per rank, used by one thread at a time (fail()
// included). Destroying it closes its connections, which the other ranks
// see as this rank disconnecting.
#pragma once

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace minfer::parallel {

// This process's rank of an n_ranks group whose rank 0 listens on `address`
// ("host:port"; host a name, an IPv4 address, 0.0.0.0 on rank 0 for every
// interface, or [v6]; port 1..65535, never 0, since the other ranks must
// know it). Returns once every rank has joined, or an error after timeout_s
// seconds. A group of one rank opens no socket.
[[nodiscard]] Result<std::unique_ptr<Communicator>> connect_socket_group(const std::string& address,
                                                                         int rank, int n_ranks,
                                                                         double timeout_s);

}  // namespace minfer::parallel

//! The static sites of the wrappers ([`crate::record`]): one line per MPI function, naming its
//! span, the [`Vals`](crate::record::Vals) slots of its fields in schema order, and its
//! correlation key. The C wrapper of `MPI_X` refers to `waffle_mpi_site_MPI_X`
//! (`WM_SPAN` in `c/wmpi.h`) and fills the same slots; a wrapper without a site here does not
//! link. `docs/mpi.md` is the schema these lines must keep.

#![allow(non_upper_case_globals)]

/// Defines the [`Site`](crate::record::Site) `waffle_mpi_site_IDENT` (a static named `IDENT`)
/// for each line `IDENT [slots];` or `IDENT [slots] correlate "key";`, whose span is named
/// `IDENT`, or the name given as `IDENT as "name" [slots]`: the site the C wrapper passes to
/// [`waffle_mpi_begin`](crate::record::waffle_mpi_begin), with its static callsites in the
/// image's callsite slice.
macro_rules! sites {
    ($($ident:ident $(as $name:literal)? [$($slot:ident),*] $(correlate $key:literal)?;)*) => {$(
        #[export_name = concat!("waffle_mpi_site_", stringify!($ident))]
        #[doc = concat!("The site of `", stringify!($ident), "`.")]
        pub static $ident: $crate::record::Site = $crate::record::Site {
            plain: callsite!(sites!(@name $ident $($name)?), [$($slot),*] ""),
            correlated: sites!(@correlated sites!(@name $ident $($name)?), [$($slot),*] $($key)?),
            write: |_v, _w| { $($crate::record::Slot::$slot.write(_v, _w);)* },
        };
    )*};
    (@name $ident:ident) => { stringify!($ident) };
    (@name $ident:ident $name:literal) => { $name };
    (@correlated $name:expr, [$($slot:ident),*]) => { callsite!($name, [$($slot),*] "") };
    (@correlated $name:expr, [$($slot:ident),*] $key:literal) => {
        callsite!($name, [$($slot),*] $key)
    };
}

/// A static span callsite named `$name` with the fields of `slots` and the correlation key
/// `$key` ("" for none), in the image's callsite slice; evaluates to a reference to it.
macro_rules! callsite {
    ($name:expr, [$($slot:ident),*] $key:expr) => {{
        #[::waffle::__private::linkme::distributed_slice(::waffle::__private::CALLSITES)]
        #[linkme(crate = ::waffle::__private::linkme)]
        static CALLSITE: ::waffle::__private::Callsite = ::waffle::__private::Callsite::new(
            ::waffle::__private::Kind::Span,
            $name,
            module_path!(),
            file!(),
            line!(),
            &[$(::waffle::__private::Field::new(
                $crate::record::Slot::$slot.name(),
                $crate::record::Slot::$slot.ty(),
            )),*],
            $key,
        );
        &CALLSITE
    }};
}

sites! {
    // c/p2p.c: a send's span carries its message's `mpi.message>`; a receive's event is
    // recorded apart (`waffle_mpi_received`).
    MPI_Send [Comm, Peer, Tag, Bytes] correlate "mpi.message>";
    MPI_Bsend [Comm, Peer, Tag, Bytes] correlate "mpi.message>";
    MPI_Ssend [Comm, Peer, Tag, Bytes] correlate "mpi.message>";
    MPI_Rsend [Comm, Peer, Tag, Bytes] correlate "mpi.message>";
    MPI_Isend [Comm, Peer, Tag, Bytes, Request] correlate "mpi.message>";
    MPI_Ibsend [Comm, Peer, Tag, Bytes, Request] correlate "mpi.message>";
    MPI_Issend [Comm, Peer, Tag, Bytes, Request] correlate "mpi.message>";
    MPI_Irsend [Comm, Peer, Tag, Bytes, Request] correlate "mpi.message>";
    MPI_Recv [Comm, Peer, Tag, Bytes];
    MPI_Irecv [Comm, Peer, Tag, Bytes, Request];
    MPI_Sendrecv [Comm, Peer, Tag, Bytes, Dest, SendTag, SendBytes] correlate "mpi.message>";
    MPI_Sendrecv_replace [Comm, Peer, Tag, Bytes, Dest, SendTag, SendBytes] correlate "mpi.message>";
    MPI_Probe [Comm, Peer, Tag];
    MPI_Iprobe [Comm, Peer, Tag];
    MPI_Mprobe [Comm, Peer, Tag];
    MPI_Improbe [Comm, Peer, Tag];
    MPI_Mrecv [Comm, Peer, Tag, Bytes];
    MPI_Imrecv [Comm, Peer, Tag, Bytes, Request];

    // c/wait.c
    MPI_Wait [Requests];
    MPI_Test [Requests];
    MPI_Waitall [Requests, Count];
    MPI_Testall [Requests, Count];
    MPI_Waitany [Requests, Count];
    MPI_Testany [Requests, Count];
    MPI_Waitsome [Requests, Count];
    MPI_Testsome [Requests, Count];

    // c/persistent.c: MPI_Start of a request that is not a persistent one of ours has no fields.
    MPI_Send_init [Comm, Peer, Tag, Bytes];
    MPI_Bsend_init [Comm, Peer, Tag, Bytes];
    MPI_Ssend_init [Comm, Peer, Tag, Bytes];
    MPI_Rsend_init [Comm, Peer, Tag, Bytes];
    MPI_Recv_init [Comm, Peer, Tag, Bytes];
    MPI_Start [Comm, Peer, Tag, Bytes, Request] correlate "mpi.message>";
    MPI_Start_foreign as "MPI_Start" [];
    MPI_Startall [Count];
    MPI_Request_free [Requests];
    MPI_Cancel [Requests];

    // c/coll.c: every collective carries `mpi.collective`.
    MPI_Barrier [Comm] correlate "mpi.collective";
    MPI_Ibarrier [Comm, Request] correlate "mpi.collective";
    MPI_Bcast [Comm, Root, Bytes] correlate "mpi.collective";
    MPI_Ibcast [Comm, Root, Bytes, Request] correlate "mpi.collective";
    MPI_Reduce [Comm, Root, Op, Bytes] correlate "mpi.collective";
    MPI_Ireduce [Comm, Root, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Allreduce [Comm, Op, Bytes] correlate "mpi.collective";
    MPI_Iallreduce [Comm, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Scan [Comm, Op, Bytes] correlate "mpi.collective";
    MPI_Iscan [Comm, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Exscan [Comm, Op, Bytes] correlate "mpi.collective";
    MPI_Iexscan [Comm, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Reduce_scatter [Comm, Op, Bytes] correlate "mpi.collective";
    MPI_Ireduce_scatter [Comm, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Reduce_scatter_block [Comm, Op, Bytes] correlate "mpi.collective";
    MPI_Ireduce_scatter_block [Comm, Op, Bytes, Request] correlate "mpi.collective";
    MPI_Gather [Comm, Root, Bytes] correlate "mpi.collective";
    MPI_Igather [Comm, Root, Bytes, Request] correlate "mpi.collective";
    MPI_Gatherv [Comm, Root, Bytes] correlate "mpi.collective";
    MPI_Igatherv [Comm, Root, Bytes, Request] correlate "mpi.collective";
    MPI_Scatter [Comm, Root, Bytes] correlate "mpi.collective";
    MPI_Iscatter [Comm, Root, Bytes, Request] correlate "mpi.collective";
    MPI_Scatterv [Comm, Root, Bytes] correlate "mpi.collective";
    MPI_Iscatterv [Comm, Root, Bytes, Request] correlate "mpi.collective";
    MPI_Allgather [Comm, Bytes] correlate "mpi.collective";
    MPI_Iallgather [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Allgatherv [Comm, Bytes] correlate "mpi.collective";
    MPI_Iallgatherv [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Alltoall [Comm, Bytes] correlate "mpi.collective";
    MPI_Ialltoall [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Alltoallv [Comm, Bytes] correlate "mpi.collective";
    MPI_Ialltoallv [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Alltoallw [Comm, Bytes] correlate "mpi.collective";
    MPI_Ialltoallw [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Neighbor_allgather [Comm, Bytes] correlate "mpi.collective";
    MPI_Ineighbor_allgather [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Neighbor_allgatherv [Comm, Bytes] correlate "mpi.collective";
    MPI_Ineighbor_allgatherv [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Neighbor_alltoall [Comm, Bytes] correlate "mpi.collective";
    MPI_Ineighbor_alltoall [Comm, Bytes, Request] correlate "mpi.collective";
    MPI_Neighbor_alltoallv [Comm, Size] correlate "mpi.collective";
    MPI_Ineighbor_alltoallv [Comm, Size, Request] correlate "mpi.collective";
    MPI_Neighbor_alltoallw [Comm, Size] correlate "mpi.collective";
    MPI_Ineighbor_alltoallw [Comm, Size, Request] correlate "mpi.collective";

    // c/comm.c: the calls that make a communicator are collective over their parent.
    MPI_Init [];
    MPI_Init_thread [Required];
    MPI_Finalize [];
    MPI_Comm_dup [Comm, Size] correlate "mpi.collective";
    MPI_Comm_dup_with_info [Comm, Size] correlate "mpi.collective";
    MPI_Comm_split [Comm, Size] correlate "mpi.collective";
    MPI_Comm_split_type [Comm, Size] correlate "mpi.collective";
    MPI_Comm_create [Comm, Size] correlate "mpi.collective";
    MPI_Comm_create_group [Comm, Tag];
    MPI_Cart_create [Comm, Size] correlate "mpi.collective";
    MPI_Cart_sub [Comm, Size] correlate "mpi.collective";
    MPI_Graph_create [Comm, Size] correlate "mpi.collective";
    MPI_Dist_graph_create [Comm, Size] correlate "mpi.collective";
    MPI_Dist_graph_create_adjacent [Comm, Size] correlate "mpi.collective";
    MPI_Intercomm_create [Comm, Size] correlate "mpi.collective";
    MPI_Intercomm_merge [Comm, Size] correlate "mpi.collective";
    MPI_Comm_free [Comm];
    MPI_Comm_disconnect [Comm];

    // c/rma.c: making a window is collective over its communicator, freeing it and fences
    // over the window (whose key is both `comm` and `window`).
    MPI_Win_create [Comm, Size] correlate "mpi.collective";
    MPI_Win_allocate [Comm, Size] correlate "mpi.collective";
    MPI_Win_allocate_shared [Comm, Size] correlate "mpi.collective";
    MPI_Win_create_dynamic [Comm, Size] correlate "mpi.collective";
    MPI_Win_free [Comm, Window] correlate "mpi.collective";
    MPI_Win_fence [Comm, Window] correlate "mpi.collective";
    MPI_Put [Window, Target, Bytes];
    MPI_Get [Window, Target, Bytes];
    MPI_Rput [Window, Target, Bytes, Request];
    MPI_Rget [Window, Target, Bytes, Request];
    MPI_Accumulate [Window, Target, Bytes, Op];
    MPI_Raccumulate [Window, Target, Bytes, Op, Request];
    MPI_Get_accumulate [Window, Target, Bytes, Op];
    MPI_Rget_accumulate [Window, Target, Bytes, Op, Request];
    MPI_Fetch_and_op [Window, Target, Bytes, Op];
    MPI_Compare_and_swap [Window, Target, Bytes];
    MPI_Win_complete [Window];
    MPI_Win_wait [Window];
    MPI_Win_unlock_all [Window];
    MPI_Win_flush_all [Window];
    MPI_Win_flush_local_all [Window];
    MPI_Win_sync [Window];
    MPI_Win_unlock [Window, Target];
    MPI_Win_flush [Window, Target];
    MPI_Win_flush_local [Window, Target];
    MPI_Win_lock [Window, Target, Exclusive];
    MPI_Win_lock_all [Window];
    MPI_Win_start [Window];
    MPI_Win_post [Window];
    MPI_Win_test [Window];
}

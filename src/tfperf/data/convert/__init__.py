"""`convert`: raw rows -> sharded TFRecord + manifest.json, in worker processes. `run`
orchestrates from the main process (`convert` itself); `options` is what it is asked to
do; `resume` what an interrupted run left; `lock` the folders it makes and holds;
`manifest_merge` how a finished split joins the folder's manifest; `worker` writes one
shard in a worker process and `pool` runs the jobs; `worker_watch` stops on a dead worker;
`disk` names a full disk. The schema, shard plan, manifest and readers it uses are the
data layer's (`data.schema`, `data.shards`, `data.manifest`, `data.sources`).
"""

# Generates AnsiballZ wrappers: argv[1] is a JSON list of [module, args, outfile].
import sys, json
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.executor.module_common import modify_module
from ansible.plugins.loader import module_loader
for name, args, out in json.loads(sys.argv[1]):
    path = module_loader.find_plugin(name)
    data, style, shebang = modify_module(name, path, args, Templar(loader=DataLoader()),
        task_vars={'ansible_python_interpreter': sys.executable}, module_compression='ZIP_DEFLATED')
    with open(out, 'wb') as f:
        f.write(data)
